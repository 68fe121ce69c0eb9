"""Writes and reads an HDF5 file through h5py (its wheel bundles libhdf5) and reports, as one
JSON line, the HDF5 calls it made and the bytes of its dataset."""

from __future__ import annotations

import json
import os
import sys

import h5py
import numpy as np

ELEMENTS = 1 << 17  # float64: a 1 MiB contiguous dataset, bigger than HDF5's sieve buffer


def main(path: str) -> None:
    data = np.arange(ELEMENTS, dtype=np.float64)
    with h5py.File(path, "w") as f:                    # H5Fcreate ... H5Fclose
        dataset = f.create_dataset("values", data=data)  # H5Dcreate2, H5Dwrite
        dataset.attrs["scale"] = 2.5                   # H5Acreate2, H5Awrite
        dataset.id.close()                             # H5Dclose
    with h5py.File(path, "r") as f:                    # H5Fopen ... H5Fclose
        dataset = f["values"]                          # H5Dopen2
        back = dataset[...]                            # H5Dread
        dataset.id.close()
    assert np.array_equal(back, data)
    print(json.dumps({"pid": os.getpid(), "path": path, "bytes": data.nbytes, "hdf5": h5py.version.hdf5_version}))


if __name__ == "__main__":
    main(sys.argv[1])
