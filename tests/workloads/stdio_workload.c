/* Writes FILE through stdio: setvbuf to a 4096-byte buffer, 1000 fwrite calls of 10 bytes,
 * then fflush and fclose; then reads it back with open and 64-byte pread calls. Prints what
 * it did, as JSON: the calls it made and the write syscalls stdio must have made for them. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#define WRITES 1000
#define RECORD 10
#define BUFFER 4096
#define CHUNK 64

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	FILE *out = fopen(argv[1], "w");
	if (!out || setvbuf(out, NULL, _IOFBF, BUFFER) != 0)
		return 1;
	for (int i = 0; i < WRITES; i++)
		if (fwrite("0123456789", 1, RECORD, out) != RECORD)
			return 1;
	if (fflush(out) != 0 || fclose(out) != 0)
		return 1;
	int fd = open(argv[1], O_RDONLY);
	if (fd < 0)
		return 1;
	char buf[CHUNK];
	long offset = 0, preads = 0, got;
	do {
		got = pread(fd, buf, sizeof buf, offset);
		preads++;
		offset += got > 0 ? got : 0;
	} while (got > 0);
	close(fd);
	long bytes = (long)WRITES * RECORD;
	/* A full buffer is written when the next fwrite does not fit; fflush writes the rest. */
	printf("{\"pid\": %d, \"tid\": %ld, \"fwrites\": %d, \"bytes\": %ld, \"write_syscalls\": %ld, "
	       "\"flushed\": %ld, \"preads\": %ld, \"read_bytes\": %ld}\n",
	       getpid(), (long)syscall(SYS_gettid), WRITES, bytes, (bytes + BUFFER - 1) / BUFFER,
	       bytes % BUFFER ? bytes % BUFFER : BUFFER, preads, offset);
	return 0;
}
