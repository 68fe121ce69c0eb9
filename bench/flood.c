/* Event generator for throughput runs: K processes, each N x pread(64 B) on a warm file,
 * as fast as they can or, with RATE, paced to RATE calls per second in all.
 * Prints {"events": K*N, "seconds": wall, "rate": events per second}.
 * cc -O2 -o flood flood.c && ./flood FILE K N [RATE] */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: %s FILE K N\n", argv[0]);
		return 2;
	}
	int k = atoi(argv[2]);
	long n = atol(argv[3]);
	double per_process = argc > 4 ? atof(argv[4]) / k : 0; /* calls per second, 0: unpaced */
	int fd = open(argv[1], O_RDWR | O_CREAT, 0600);
	char buf[64] = {0};
	if (fd < 0 || pwrite(fd, buf, sizeof(buf), 0) != sizeof(buf))
		return 1;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < k; i++) {
		if (fork() == 0) {
			for (long j = 0; j < n; j++) {
				if (pread(fd, buf, sizeof(buf), 0) != sizeof(buf))
					_exit(1);
				if (per_process > 0 && j % 256 == 255) { /* sleep until call j is due */
					double due = (j + 1) / per_process;
					struct timespec now;
					clock_gettime(CLOCK_MONOTONIC, &now);
					double ahead = due - ((now.tv_sec - t0.tv_sec) + (now.tv_nsec - t0.tv_nsec) / 1e9);
					if (ahead > 0) {
						struct timespec pause = {(time_t)ahead, (long)((ahead - (time_t)ahead) * 1e9)};
						nanosleep(&pause, NULL);
					}
				}
			}
			_exit(0);
		}
	}
	int status, failed = 0;
	while (wait(&status) > 0)
		failed |= !WIFEXITED(status) || WEXITSTATUS(status);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	printf("{\"events\": %ld, \"seconds\": %.4f, \"rate\": %.0f}\n", (long)k * n, s, k * n / s);
	return failed;
}
