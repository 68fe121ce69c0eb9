/* N x pread(4 KiB) cycling over a warm 1 MiB file; prints ns per call.
 * cc -O2 -o microbench microbench.c && ./microbench FILE [N] */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s FILE [N]\n", argv[0]);
		return 2;
	}
	long n = argc > 2 ? atol(argv[2]) : 1000000;
	static char buf[4096];
	int fd = open(argv[1], O_RDWR | O_CREAT, 0600);
	if (fd < 0) {
		perror("open");
		return 1;
	}
	for (int i = 0; i < 256; i++) /* 1 MiB, then warm the cache */
		if (pwrite(fd, buf, sizeof(buf), (off_t)i * 4096) != sizeof(buf))
			return 1;
	for (int i = 0; i < 256; i++)
		if (pread(fd, buf, sizeof(buf), (off_t)i * 4096) != sizeof(buf))
			return 1;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long i = 0; i < n; i++)
		if (pread(fd, buf, sizeof(buf), (off_t)(i & 255) * 4096) != sizeof(buf))
			return 1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	close(fd);
	double ns = (t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec);
	printf("{\"calls\": %ld, \"ns_per_call\": %.1f}\n", n, ns / n);
	return 0;
}
