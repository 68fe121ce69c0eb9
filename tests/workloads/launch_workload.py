"""A launcher and its ranks, for process-context tests.

`launcher DATA`: starts two rank processes the way torchrun under srun would (SLURM_JOB_ID,
SLURM_PROCID and SLURM_LOCALID from "srun", RANK/LOCAL_RANK/WORLD_SIZE from "torchrun"),
and prints their reports. Each rank tags epoch=0, reads DATA 3 times, starts a spawn pool
of 4 workers (worker k reads DATA k+1 times), sends one malformed tag, tags epoch=1 and
phase=train, reads DATA 2 times, forks a child that reads it once, and runs `cat DATA` until
one run lives less than 5 ms. Prints one JSON report per rank.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import time

TAG_DIR = "/run/ioobserve/tag/"
JOB = "777"


def tag(text: str) -> None:
    """The documented way to tag: a failed lookup of a path the probes see."""
    os.access(TAG_DIR + text, os.F_OK)


def read(path: str, times: int) -> None:
    for _ in range(times):
        with open(path, "rb") as handle:
            handle.read(4096)


def worker(path: str, index: int) -> None:
    read(path, index + 1)


def short_lived(path: str) -> tuple[int, float]:
    """(pid, seconds alive) of a `cat` that lived less than 5 ms, or the fastest of 50."""
    best = (0, float("inf"))
    for _ in range(50):
        start = time.perf_counter()
        quiet = [(os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0)]
        pid = os.posix_spawn("/bin/cat", ["cat", path], {**os.environ}, file_actions=quiet)
        os.waitpid(pid, 0)
        best = min(best, (pid, time.perf_counter() - start), key=lambda found: found[1])
        if best[1] < 0.005:
            break
    return best


def rank(path: str) -> None:
    tag("epoch=0")
    read(path, 3)
    spawn = multiprocessing.get_context("spawn")
    workers = [spawn.Process(target=worker, args=(path, k)) for k in range(4)]
    for process in workers:
        process.start()
    for process in workers:
        process.join()
    tag("not a tag")
    tag("epoch=1,phase=train")
    read(path, 2)
    child = os.fork()
    if child == 0:
        read(path, 1)
        os._exit(0)
    os.waitpid(child, 0)
    cat, alive = short_lived(path)
    report = json.dumps({"rank_pid": os.getpid(), "rank": int(os.environ["RANK"]), "workers": [p.pid for p in workers],
                         "fork_child": child, "cat": cat, "cat_alive_s": alive})
    sys.stdout.flush()
    os.write(sys.stdout.fileno(), (report + "\n").encode())  # one write: the ranks share a pipe


def launcher(path: str) -> None:
    ranks = []
    for index in range(2):
        env = {**os.environ, "SLURM_JOB_ID": JOB, "SLURM_PROCID": "0", "SLURM_LOCALID": "0",
               "RANK": str(10 + index), "LOCAL_RANK": str(index), "WORLD_SIZE": "16"}
        ranks.append(subprocess.Popen([sys.executable, __file__, "rank", path], env=env, stdout=subprocess.PIPE, text=True))
    for process in ranks:
        out, _ = process.communicate(timeout=120)
        sys.stdout.write(out)
        if process.returncode:
            sys.exit(process.returncode)


if __name__ == "__main__":
    {"launcher": launcher, "rank": rank}[sys.argv[1]](sys.argv[2])
