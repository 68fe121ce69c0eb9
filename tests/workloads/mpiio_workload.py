"""Each MPI rank writes its own block of one shared file collectively (MPI_File_write_at_all),
then reads it back collectively, through mpi4py; rank 0 prints a JSON line per rank."""

from __future__ import annotations

import json
import os
import sys

import numpy as np
from mpi4py import MPI

ELEMENTS = 1 << 16  # float64 per rank: 512 KiB


def main(path: str) -> None:
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    block = np.full(ELEMENTS, rank, dtype=np.float64)
    fh = MPI.File.Open(comm, path, MPI.MODE_CREATE | MPI.MODE_WRONLY)
    fh.Write_at_all(rank * block.nbytes, block)
    fh.Close()
    back = np.empty_like(block)
    fh = MPI.File.Open(comm, path, MPI.MODE_RDONLY)
    fh.Read_at_all(rank * block.nbytes, back)
    fh.Close()
    assert np.array_equal(back, block)
    mine = {"pid": os.getpid(), "rank": rank, "size": comm.Get_size(), "path": path, "elements": ELEMENTS,
            "bytes": block.nbytes}
    reports = comm.gather(mine)  # printed by one rank: two ranks' lines could interleave
    if rank == 0:
        print("\n".join(json.dumps(report) for report in reports), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
