"""Does a known amount of POSIX I/O in DIR and prints it as one JSON line (for DFTracer runs)."""

import json
import os
import sys

FILES, SIZE, CHUNK = 4, 12288, 4096


def main() -> None:
    directory = sys.argv[1]
    files, reads, writes, bytes_read, bytes_written = [], 0, 0, 0, 0
    for i in range(FILES):
        path = os.path.join(directory, f"f{i}.bin")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        writes += 1
        bytes_written += os.write(fd, b"x" * SIZE)
        os.close(fd)
        files.append(path)
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        while True:
            data = os.read(fd, CHUNK)
            reads += 1
            bytes_read += len(data)
            if not data:
                break
        os.close(fd)
    print(json.dumps({"files": files, "reads": reads, "writes": writes, "bytes_read": bytes_read,
                      "bytes_written": bytes_written}))


if __name__ == "__main__":
    main()
