/* Runs a command in a root file system of its own, the two ways jobs get one:
 *   in_root chroot ROOT CMD...  chroot(2) in the caller's mount namespace (ROOT/proc must be
 *                               mounted already), as `chroot` and Apptainer's simplest mode do;
 *   in_root pivot ROOT CMD...   a new mount namespace, ROOT bound onto itself with /proc mounted
 *                               in it, pivot_root(2) into it and the old root detached, as
 *                               runc and crun do for a container.
 * The command starts in / of its new root. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static int fail(const char *what)
{
	perror(what);
	return 125;
}

static int pivot(const char *root)
{
	char path[4096];
	if (unshare(CLONE_NEWNS) != 0)
		return fail("unshare");
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)  /* nothing leaks back to the host */
		return fail("mount --make-rprivate /");
	if (mount(root, root, NULL, MS_BIND | MS_REC, NULL) != 0)  /* pivot_root wants a mount point */
		return fail("mount --bind ROOT ROOT");
	snprintf(path, sizeof(path), "%s/proc", root);
	if (mount("proc", path, "proc", 0, NULL) != 0)
		return fail("mount proc");
	snprintf(path, sizeof(path), "%s/.oldroot", root);
	mkdir(path, 0700);
	if (chdir(root) != 0)
		return fail("chdir ROOT");
	if (syscall(SYS_pivot_root, ".", ".oldroot") != 0)
		return fail("pivot_root");
	if (umount2("/.oldroot", MNT_DETACH) != 0)
		return fail("umount /.oldroot");
	rmdir("/.oldroot");  /* nothing of it left in ROOT */
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 4 || (strcmp(argv[1], "chroot") != 0 && strcmp(argv[1], "pivot") != 0)) {
		fprintf(stderr, "usage: in_root chroot|pivot ROOT CMD [ARGS...]\n");
		return 2;
	}
	const char *root = argv[2];
	if (strcmp(argv[1], "pivot") == 0) {
		int failed = pivot(root);
		if (failed)
			return failed;
	} else if (chroot(root) != 0) {
		return fail("chroot");
	}
	if (chdir("/") != 0)
		return fail("chdir /");
	execv(argv[3], argv + 3);
	return fail(argv[3]);
}
