"""What a process's launcher told it: Slurm job and step, rank, local rank and world size,
read from the environment it was exec'd with; and what kind of multiprocessing child it is.

The kernel sends each new program's environment with its exec record, so even a process
that exits at once is read. Nothing else of the environment is kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

# Where each field comes from, most specific launcher first: torchrun's RANK under srun is
# the training rank, SLURM_PROCID only the task's.
JOB_VARIABLES = ("SLURM_JOB_ID", "SLURM_JOBID")
STEP_VARIABLES = ("SLURM_STEP_ID", "SLURM_STEPID")
RANK_VARIABLES = ("RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID")
LOCAL_RANK_VARIABLES = ("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID")
WORLD_SIZE_VARIABLES = ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS")
_ALL = JOB_VARIABLES + STEP_VARIABLES + RANK_VARIABLES + LOCAL_RANK_VARIABLES + WORLD_SIZE_VARIABLES
_WANTED = re.compile(rb"(?:^|\0)(" + b"|".join(re.escape(v.encode()) for v in _ALL) + rb")=([^\0]*)")


@dataclass(frozen=True)
class Launch:
    """The launcher's view of one process (None: not set, or not a number where one is due)."""

    job: str | None = None
    step: str | None = None
    rank: int | None = None
    local_rank: int | None = None
    world_size: int | None = None


def _first(found: dict[str, str], names: tuple[str, ...]) -> str | None:
    return next((found[name] for name in names if found.get(name)), None)


def _number(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() and len(text) < 10 else None


def launch_from_environ(environ: bytes) -> Launch:
    """The launch context in an environment block (NUL-separated NAME=value strings)."""
    found = {name.decode(): value.decode("utf-8", "replace") for name, value in _WANTED.findall(environ)}
    job = _first(found, JOB_VARIABLES)
    return Launch(
        job=job if job is not None and job.isdigit() else None,
        step=_first(found, STEP_VARIABLES),
        rank=_number(_first(found, RANK_VARIABLES)),
        local_rank=_number(_first(found, LOCAL_RANK_VARIABLES)),
        world_size=_number(_first(found, WORLD_SIZE_VARIABLES)),
    )


def read_environ(pid: int, proc: Path = Path("/proc")) -> bytes | None:
    """A live process's initial environment, or None if it is gone or unreadable."""
    try:
        return (proc / str(pid) / "environ").read_bytes()
    except OSError:
        return None


SPAWN_CHILD, HELPER, PROGRAM = "spawn", "helper", "program"


def child_kind(argv: tuple[str, ...]) -> str:
    """How an exec'd program relates to the process that forked it: a multiprocessing spawn
    child (a worker), a multiprocessing helper (resource tracker, fork server), or a program."""
    text = " ".join(argv[:6])
    if "--multiprocessing-fork" in argv or "spawn_main" in text:
        return SPAWN_CHILD
    if "multiprocessing.resource_tracker" in text or "multiprocessing.forkserver" in text or "semaphore_tracker" in text:
        return HELPER
    return PROGRAM
