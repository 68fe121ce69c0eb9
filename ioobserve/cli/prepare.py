"""The one way `record`, `top` and `serve` start a recording: the host checked, then the
caller's options, then the probes compiled; any failure is one clear line and an exit."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from ioobserve.cli.errors import UserError, fail, fail_probes
from ioobserve.probes.attach.python import PythonOptions
from ioobserve.probes.layers import DEFAULT as DEFAULT_LAYERS
from ioobserve.probes.load.loader import Probes, ProbeSizes
from ioobserve.probes.maps.filters import KernelFilters


@dataclass
class ProbeChoice:
    """What a recording's probes select and are compiled for; commands add their own options."""

    filters: KernelFilters = field(default_factory=KernelFilters)
    layers: frozenset[str] = DEFAULT_LAYERS
    python: PythonOptions = PythonOptions()
    sizes: ProbeSizes = ProbeSizes()

    def abandon(self) -> None:
        """The probes could not be compiled: give back what choosing took (serve's listeners)."""


Choice = TypeVar("Choice", bound=ProbeChoice)


def prepare_recording(purpose: str, choose: Callable[[], Choice]) -> tuple[Choice, Probes]:
    """Why the host cannot do `purpose` (privileges, lockdown), else the caller's options
    (`choose`, which raises UserError or OutputError for a bad one), else the probes compiled
    for them, with a warning for each layer this kernel lacks and each capability missing."""
    from ioobserve.collect.recording import load_probes
    from ioobserve.probes.build.compile import ProbeError
    from ioobserve.probes.capabilities import capability_warnings, not_ready
    from ioobserve.trace.output import OutputError

    try:
        problem = not_ready(purpose)
        if problem:
            raise UserError(problem)
        choice = choose()
    except (UserError, OutputError) as exc:
        fail(str(exc))
    try:
        probes = load_probes(choice.sizes, layers=choice.layers, python=choice.python)
    except ProbeError as exc:
        choice.abandon()
        fail_probes(exc)
    except KeyboardInterrupt:
        choice.abandon()
        fail("interrupted while compiling the probes; nothing was recorded", 130)
    for layer, why in probes.unavailable_layers.items():
        warn(f"the {layer} layer is unavailable here: {why}")
    for missing in capability_warnings():
        warn(missing)
    return choice, probes


def warn(message: str) -> None:
    """`ioobserve: warning: message` on stderr, at once."""
    print(f"ioobserve: warning: {message}", file=sys.stderr, flush=True)
