"""The event lines as Polars made them before the compiled core (issue 46): the oracle that
ioobserve/csrc/lines.c is compared with, byte for byte. Not used by the package."""

from __future__ import annotations

import io

import polars as pl

from ioobserve.data import events as ev
from ioobserve.data import schema as s
from ioobserve.trace.lines import EVENT_FIELDS, FIELD_DEFAULTS, literal_tokens

QUOTED = frozenset({"name", "fhash", "fhash2", "module"})
_SEPARATOR = "\x1f"  # between template columns, removed after writing: no value contains it


def _values(precision: str) -> dict[str, pl.Expr]:
    """Each field's value, null where it does not apply (at its default included)."""
    parent = (pl.col(s.FLAGS) & ev.F_PARENT) != 0
    values = {
        "name": pl.col(s.OP), "pid": pl.col(s.PID), "tid": pl.col(s.TID),
        "ts": pl.col(s.TS) // 1000, "dur": pl.col(s.DUR) // 1000,
        "fhash": pl.col("fhash"), "fhash2": pl.col("fhash2"), "ret": pl.col(s.RET), "count": pl.col(s.BYTES_REQ),
        "offset": pl.col(s.OFFSET), "fd": pl.col(s.FD), "arg": pl.col(s.ARG), "uid": pl.col(s.UID),
        "cgroup": pl.col(s.CGROUP), "evflags": pl.col(s.FLAGS),
        "tns": pl.col(s.TS) % 1000 if precision == "ns" else pl.when(parent).then(pl.max_horizontal(pl.col(s.TS) % 1000, 1)),
        "dns": pl.col(s.DUR) % 1000 if precision == "ns" else pl.lit(None, pl.UInt64),
        "pts": pl.col(s.PARENT_TS) if precision == "ns" else
        pl.when(pl.col(s.PARENT_TS) % 1000 == 0).then(pl.col(s.PARENT_TS) + 1).otherwise(pl.col(s.PARENT_TS)),
        "pystack": pl.col(s.PY_STACK), "pyframe": pl.col(s.PY_FRAME),
        "module": pl.col(s.PY_MODULE).str.replace_all(r"[^\w.\-]", "?"), "status": pl.when(pl.col(s.STATUS) != 0).then(pl.col(s.STATUS)),  # 0: none
    }
    for key, default in FIELD_DEFAULTS.items():
        if key == "tns" and precision != "ns":
            continue
        values[key] = pl.when(values[key] != default).then(values[key])
    return values


def event_lines(frame: pl.DataFrame, precision: str, file_prefix: str) -> dict[tuple[str, int], tuple[bytes, pl.DataFrame]]:
    """(text, frame of the written ts and pid) per (layer, shape), as the writer made them
    with Polars' CSV writer before the compiled core."""
    hexed = {key: pl.when(pl.col(column).is_not_null()).then(pl.lit(file_prefix) + pl.col(column).cast(pl.UInt64).map_elements(
        lambda value: f"{value:x}", return_dtype=pl.String)) for key, column in (("fhash", s.FILE), ("fhash2", s.FILE2))}
    frame = frame.with_columns(**hexed)
    values = _values(precision)
    keys = [key for key, _ in EVENT_FIELDS]
    present = [pl.col(f"v_{key}").is_not_null().cast(pl.UInt32) * (1 << index) for index, key in enumerate(keys)]
    table = frame.sort(s.TS, maintain_order=True).select(s.LAYER, s.PID, *(values[key].alias(f"v_{key}") for key in keys))
    table = table.with_columns(pl.sum_horizontal(present).alias("_shape"))
    groups = {}
    for (layer, shape), group in table.group_by(s.LAYER, "_shape", maintain_order=True):
        fields = [key for index, key in enumerate(keys) if shape & (1 << index)]
        tokens = literal_tokens(layer, fields)
        columns = []
        for index, key in enumerate(fields):
            value = pl.col(f"v_{key}")
            if key in QUOTED:
                value = pl.concat_str(pl.lit('"'), value, pl.lit('"'))
            columns += [pl.lit(tokens[index]).alias(f"_{index}"), value.alias(key)]
        columns.append(pl.lit(tokens[-1]).alias("_end"))
        out = io.BytesIO()
        group.select(columns).write_csv(out, separator=_SEPARATOR, include_header=False, quote_style="never")
        written = (pl.col("v_ts") * 1000 + pl.col("v_tns").fill_null(0)).cast(pl.UInt64).alias(s.TS)
        groups[(layer, shape)] = out.getvalue().replace(_SEPARATOR.encode(), b""), group.select(written, s.PID)
    return groups
