"""A member of our event lines read with Polars' CSV reader, as before the compiled core
(issue 46): the oracle that ioobserve/csrc/parse.c is compared with. Not used by the package."""

from __future__ import annotations

import io

import polars as pl

from ioobserve.trace.lines import EVENT_FIELDS, literal_tokens
from ioobserve.trace.read.parse import RAW_SCHEMA, MalformedMember, Shape, with_defaults

_SEPARATOR = b":"
_TO_SEPARATOR = bytes.maketrans(b",{}", _SEPARATOR * 3)


def _columns(shape: Shape) -> tuple[int, dict[str, tuple[int, pl.DataType]]]:
    """(separators per line, field -> (column, type)) of a shape's lines read as columns."""
    tokens = literal_tokens(shape.layer, list(shape.fields))
    types = dict(EVENT_FIELDS)
    at, where = 0, {}
    for token, key in zip(tokens, shape.fields):
        at += token.encode().translate(_TO_SEPARATOR).count(_SEPARATOR)
        where[key] = (at, types[key])
    at += tokens[-1].encode().translate(_TO_SEPARATOR).count(_SEPARATOR)
    return at, where


def shape_events(text: bytes, shape: Shape) -> pl.DataFrame:
    """Every RAW_SCHEMA field of a member of one shape, with the JSON punctuation between
    values turned into one separator and the result read as CSV."""
    separators, where = _columns(shape)
    columnar = text.translate(_TO_SEPARATOR)
    schema = {f"_{i}": pl.String for i in range(separators + 1)}
    for key, (column, dtype) in where.items():
        schema[f"_{column}"] = dtype
    present = [key for key in RAW_SCHEMA if key in where]
    try:
        frame = pl.scan_csv(
            io.BytesIO(columnar), separator=":", has_header=False, quote_char='"', schema=schema,
        ).select(pl.col(f"_{where[key][0]}").alias(key) for key in present).collect()
    except pl.exceptions.PolarsError as exc:
        raise MalformedMember(str(exc).splitlines()[0]) from None
    if columnar.count(_SEPARATOR) != separators * frame.height or not columnar.endswith(b"\n"):
        raise MalformedMember("its lines are not all of its first line's shape")
    return with_defaults(frame.with_columns(pl.lit(shape.layer).alias("cat")))
