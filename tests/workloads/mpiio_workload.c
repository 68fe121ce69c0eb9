/* The C twin of mpiio_workload.py, for roots without the host's mpi4py: each MPI rank writes
 * its own block of one shared file collectively (MPI_File_write_at_all), then reads it back
 * collectively; each rank prints one JSON line (one write, so lines do not interleave).
 * `mpiio_workload --hold` maps the MPI library, prints READY and waits for a line on stdin:
 * a process holding the library while a recording starts. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define ELEMENTS (1 << 16) /* doubles per rank: 512 KiB */

static double block[ELEMENTS], back[ELEMENTS];

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	if (strcmp(argv[1], "--hold") == 0) {
		char line[16];
		printf("READY\n");
		fflush(stdout);
		return fgets(line, sizeof(line), stdin) ? 0 : 1;
	}
	MPI_Init(&argc, &argv);
	int rank, size;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	for (int i = 0; i < ELEMENTS; i++)
		block[i] = rank;
	MPI_Offset at = (MPI_Offset)rank * sizeof(block);
	MPI_File fh;
	if (MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh) != MPI_SUCCESS ||
	    MPI_File_write_at_all(fh, at, block, ELEMENTS, MPI_DOUBLE, MPI_STATUS_IGNORE) != MPI_SUCCESS ||
	    MPI_File_close(&fh) != MPI_SUCCESS)
		MPI_Abort(MPI_COMM_WORLD, 1);
	if (MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_RDONLY, MPI_INFO_NULL, &fh) != MPI_SUCCESS ||
	    MPI_File_read_at_all(fh, at, back, ELEMENTS, MPI_DOUBLE, MPI_STATUS_IGNORE) != MPI_SUCCESS ||
	    MPI_File_close(&fh) != MPI_SUCCESS || memcmp(block, back, sizeof(block)) != 0)
		MPI_Abort(MPI_COMM_WORLD, 1);
	char line[512];
	int n = snprintf(line, sizeof(line),
			 "{\"pid\": %d, \"rank\": %d, \"size\": %d, \"path\": \"%s\", \"elements\": %d, \"bytes\": %zu}\n",
			 (int)getpid(), rank, size, argv[1], ELEMENTS, sizeof(block));
	write(1, line, n);
	MPI_Finalize();
	return 0;
}
