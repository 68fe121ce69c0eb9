/* Runs a command as its child and reports everything a parent can see of it: each status
 * waitpid(WUNTRACED | WCONTINUED) returns, and each SIGCHLD (its handler has no SA_NOCLDSTOP,
 * so a stop and a continue would each send one). The child installs a SIGCONT handler before
 * it execs, which a SIGCONT would run while the old program is still in place; it reports
 * through a pipe that stays open across the exec only if the handler ran.
 *   wait_watch CMD...  ->  {"waited": ["exited 0"], "sigchld": {"exited": 1, ...}, "sigcont_seen": 0}
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t exited, stopped, continued, other;
static int cont_pipe[2];

static void on_sigchld(int signo, siginfo_t *info, void *context)
{
	(void)signo, (void)context;
	if (info->si_code == CLD_STOPPED)
		stopped++;
	else if (info->si_code == CLD_CONTINUED)
		continued++;
	else if (info->si_code == CLD_EXITED)
		exited++;
	else
		other++;
}

static void on_sigcont(int signo)
{
	(void)signo;
	(void)!write(cont_pipe[1], "c", 1);
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	struct sigaction act = {0};
	act.sa_sigaction = on_sigchld;
	act.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&act.sa_mask);
	if (sigaction(SIGCHLD, &act, NULL) != 0 || pipe(cont_pipe) != 0)
		return 1;
	pid_t child = fork();
	if (child < 0)
		return 1;
	if (child == 0) {
		signal(SIGCONT, on_sigcont);
		close(cont_pipe[0]);
		execv(argv[1], argv + 1);
		_exit(127);
	}
	close(cont_pipe[1]);
	char waited[1024] = "";
	int status;
	for (;;) {
		pid_t got = waitpid(child, &status, WUNTRACED | WCONTINUED);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return 1;
		char one[64];
		if (WIFEXITED(status))
			snprintf(one, sizeof one, "\"exited %d\"", WEXITSTATUS(status));
		else if (WIFSIGNALED(status))
			snprintf(one, sizeof one, "\"killed %d\"", WTERMSIG(status));
		else if (WIFSTOPPED(status))
			snprintf(one, sizeof one, "\"stopped %d\"", WSTOPSIG(status));
		else
			snprintf(one, sizeof one, "\"continued\"");
		if (waited[0])
			strncat(waited, ", ", sizeof waited - strlen(waited) - 1);
		strncat(waited, one, sizeof waited - strlen(waited) - 1);
		if (WIFEXITED(status) || WIFSIGNALED(status))
			break;
	}
	char seen[16];
	ssize_t sigconts = read(cont_pipe[0], seen, sizeof seen);
	printf("{\"waited\": [%s], \"sigchld\": {\"exited\": %d, \"stopped\": %d, \"continued\": %d, \"other\": %d}, "
	       "\"sigcont_seen\": %zd}\n", waited, exited, stopped, continued, other, sigconts > 0 ? sigconts : 0);
	return 0;
}
