/* N x fwrite(10 B) through a 4096-byte stdio buffer to FILE; prints ns per call.
 * cc -O2 -o fwrite_bench fwrite_bench.c && ./fwrite_bench FILE [N] */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s FILE [N]\n", argv[0]);
		return 2;
	}
	long n = argc > 2 ? atol(argv[2]) : 1000000;
	FILE *out = fopen(argv[1], "w");
	if (!out || setvbuf(out, NULL, _IOFBF, 4096) != 0) {
		perror("fopen");
		return 1;
	}
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long i = 0; i < n; i++)
		if (fwrite("0123456789", 1, 10, out) != 10)
			return 1;
	if (fflush(out) != 0)
		return 1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	fclose(out);
	double ns = (t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec);
	printf("{\"calls\": %ld, \"ns_per_call\": %.1f}\n", n, ns / n);
	return 0;
}
