"""A bcc BPF object made from a cached compile: its maps created and its programs loaded by
ioobserve (bpf_syscall), everything else (tables, attaching, detaching) bcc's own code."""

from __future__ import annotations

import atexit
import contextlib
import json
import os

from bcc import BPF
from bcc.table import Array, HashTable, LruHash, PerCpuArray, ProgArray, RingBuf

from ioobserve.probes.build.object_cache import CompiledObject, relocate
from ioobserve.probes.kernel.bpf_syscall import btf_load, map_create, prog_load
from ioobserve.probes.load.portable_cfg import jump_closed_loops

# bcc's table classes by map type: the ones ioobserve reads or fills from user space.
TABLE_CLASSES = {1: HashTable, 2: Array, 3: ProgArray, 6: PerCpuArray, 9: LruHash, 27: RingBuf}


class CachedBPF(BPF):
    """The probes of a cached compile, with bcc.BPF's interface (no module: nothing compiled)."""

    def __init__(self, compiled: CompiledObject):
        # bcc.BPF's own state, as its constructor sets it (calling it would compile).
        self.kprobe_fds, self.uprobe_fds, self.tracepoint_fds, self.raw_tracepoint_fds = {}, {}, {}, {}
        self.kfunc_entry_fds, self.kfunc_exit_fds, self.lsm_fds = {}, {}, {}
        self.perf_buffers, self.open_perf_events = {}, {}
        self._ringbuf_manager = None
        self.tracefile = None
        self.debug = 0
        self.funcs, self.tables = {}, {}
        self.module = None
        self.compiled = compiled
        self._map_fds: list[int] = []
        self._btf_fd = btf_load(compiled.btf) if compiled.btf else 0
        try:
            for spec in compiled.maps:
                btf = (self._btf_fd, spec.btf_key_type_id, spec.btf_value_type_id) if self._btf_fd else ()
                self._map_fds.append(map_create(spec.type, spec.key_size, spec.value_size, spec.max_entries,
                                                spec.flags, spec.name.encode(), *btf))
        except BaseException:
            self.close()
            raise
        self._maps = {spec.name: (index, spec) for index, spec in enumerate(compiled.maps)}
        atexit.register(self.cleanup)

    def load_func(self, func_name, prog_type, device=None, attach_type=-1):
        """Load (verify) a program once; bcc.BPF.Function with its fd."""
        if func_name in self.funcs:
            return self.funcs[func_name]
        fd = prog_load(prog_type, self.instructions(func_name.decode()), func_name, self.compiled.license.encode(),
                       self.compiled.kern_version, max(attach_type, 0))
        function = self.funcs[func_name] = BPF.Function(self, func_name, fd)
        return function

    def instructions(self, name: str, maps: dict[str, int] | None = None) -> bytes:
        """A program's instructions with this object's map fds in place (or those of `maps`,
        by map name: copies made by clone_map), its loops closed by jumps (portable_cfg: what
        older verifiers require)."""
        code = self.compiled.programs.get(name)
        if code is None:
            raise Exception(f"Unknown program {name}")  # as bcc raises it
        fds = dict(enumerate(self._map_fds))
        for map_name, fd in (maps or {}).items():
            fds[self._maps[map_name][0]] = fd
        return jump_closed_loops(relocate(code, fds))

    def clone_map(self, name: str) -> int:
        """A new, empty map made like `name` (the caller closes it): a program loaded with it
        in place (instructions(maps=...)) uses the copy."""
        spec = self._maps[name][1]
        return map_create(spec.type, spec.key_size, spec.value_size, spec.max_entries, spec.flags,
                          spec.name.encode())

    def get_table(self, name, keytype=None, leaftype=None, reducer=None):
        """A bcc table over one of the maps."""
        index, spec = self._maps[name.decode() if isinstance(name, bytes) else name]
        kind = TABLE_CLASSES.get(spec.type)
        if kind is None:
            raise KeyError(f"map {spec.name} (type {spec.type}) is not open to user space")
        keytype = keytype or BPF._decode_table_type(json.loads(spec.key_desc))
        leaftype = leaftype or BPF._decode_table_type(json.loads(spec.leaf_desc))
        extra = {"reducer": reducer} if kind is PerCpuArray else {}
        table = kind(self, index, self._map_fds[index], keytype, leaftype, name, **extra)
        # bcc reads these from its module, which there is none of.
        table.ttype, table.flags, table.max_entries = spec.type, spec.flags, spec.max_entries
        return table

    def close(self):
        """Close the programs, maps and BTF (attached programs are not detached)."""
        super().close()
        self.tables.clear()
        while self._map_fds:
            with contextlib.suppress(OSError):
                os.close(self._map_fds.pop())
        if self._btf_fd:
            with contextlib.suppress(OSError):
                os.close(self._btf_fd)
            self._btf_fd = 0
