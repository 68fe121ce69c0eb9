"""IntervalRuns measure unions exactly however their intervals arrive: runs out of order,
blocks smaller than a run, runs written to files, stores combined and sent as pickles."""

from __future__ import annotations

import pickle
import random

import numpy as np
import polars as pl
import pytest

from ioobserve.analysis import spilled_runs as runs_module
from ioobserve.analysis.intervals import END, START
from ioobserve.analysis.spilled_runs import IntervalRuns

KEYS = [("SYSCALL", "7", "io"), ("SYSCALL", "8", "io"), ("SYSCALL", None, "compute"), ("PYTHON", "7", "data")]


def _random_chunks(seed: int, chunks: int = 30, per_chunk: int = 200) -> list[pl.DataFrame]:
    """Chunks of intervals under KEYS, mostly later than the chunk before, sometimes earlier
    (a run that does not continue), crossing chunk seams."""
    rng = random.Random(seed)
    frames, clock = [], 0
    for _ in range(chunks):
        clock = clock + rng.randrange(0, 50_000) if rng.random() < 0.8 else max(0, clock - rng.randrange(0, 200_000))
        rows = []
        for _ in range(per_chunk):
            start = clock + rng.randrange(0, 100_000)
            rows.append((*rng.choice(KEYS), start, start + rng.randrange(0, 3_000)))
        frames.append(pl.DataFrame(rows, schema={"layer": pl.String, "job": pl.String, "scope": pl.String,
                                                 START: pl.Int64, END: pl.Int64}, orient="row"))
    return frames


def _union(intervals: list[tuple[int, int]]) -> int:
    total, reached, begun = 0, None, None
    for start, end in sorted(i for i in intervals if i[1] > i[0]):
        if reached is None or start > reached:
            total += 0 if reached is None else reached - begun
            begun, reached = start, end
        else:
            reached = max(reached, end)
    return total + (0 if reached is None else reached - begun)


def _expected(frames: list[pl.DataFrame], targets) -> dict:
    found: dict = {}
    for frame in frames:
        for layer, job, scope, start, end in frame.iter_rows():
            for target in targets((layer, job, scope)):
                found.setdefault(target, []).append((start, end))
    return {target: _union(intervals) for target, intervals in found.items()}


def _per_key(key):
    return [key]


def _together(key):
    return [key, ("every", key[2] == "io")]


def _store(frames: list[pl.DataFrame]) -> IntervalRuns:
    store = IntervalRuns()
    for frame in frames:
        store.add(frame, ["layer", "job", "scope"])
    return store


@pytest.mark.parametrize("targets", [_per_key, _together])
def test_union_lengths_are_exact(targets):
    frames = _random_chunks(seed=1)
    assert _store(frames).union_lengths(targets) == _expected(frames, targets)


def test_runs_on_disk_in_small_blocks_give_the_same_lengths(monkeypatch):
    frames = _random_chunks(seed=2)
    in_memory = _store(frames).union_lengths(_together)
    monkeypatch.setattr(runs_module, "SPILL_ROWS", 300)
    monkeypatch.setattr(runs_module, "MERGE_BYTES", 64 * runs_module.ROW.itemsize)
    monkeypatch.setattr(runs_module, "MIN_BLOCK_ROWS", 16)
    store = _store(frames)
    files = list(store._directory.path.iterdir())
    assert files and all(f.stat().st_size for f in files)
    assert len(store) == sum(frame.filter(pl.col(END) > pl.col(START)).height for frame in frames)
    assert store.union_lengths(_together) == in_memory == _expected(frames, _together)


def test_stores_combine_and_travel_as_pickles(monkeypatch):
    monkeypatch.setattr(runs_module, "SPILL_ROWS", 500)
    frames = _random_chunks(seed=3)
    first, second = _store(frames[:15]), _store(frames[15:])
    combined = IntervalRuns()
    combined.extend(pickle.loads(pickle.dumps(first)))
    combined.extend(second)
    assert combined.union_lengths(_together) == _expected(frames, _together)


def test_a_store_never_writes_into_the_runs_it_took(monkeypatch):
    """Two stores taking the same spilled runs and adding after them each keep their own rows."""
    monkeypatch.setattr(runs_module, "SPILL_ROWS", 100)
    frames = sorted(_random_chunks(seed=5), key=lambda f: f.get_column(START).min())
    ordered = [pl.concat(frames).sort(START).slice(i, 500) for i in range(0, 6000, 500)]
    shared = _store(ordered[:6])
    first, second = IntervalRuns(), IntervalRuns()
    for store, later in ((first, ordered[6:9]), (second, ordered[9:])):
        store.extend(shared)
        for frame in later:
            store.add(frame, ["layer", "job", "scope"])
    assert first.union_lengths(_per_key) == _expected(ordered[:9], _per_key)
    assert second.union_lengths(_per_key) == _expected(ordered[:6] + ordered[9:], _per_key)


def test_a_time_ordered_stream_makes_one_run():
    frames = sorted(_random_chunks(seed=4), key=lambda f: f.get_column(START).min())
    ordered = [pl.concat(frames).sort(START).slice(i, 500) for i in range(0, 6000, 500)]
    store = _store(ordered)
    assert len(store._runs) == 1
    assert store.union_lengths(_per_key) == _expected(ordered, _per_key)


def test_intervals_spread_over_decades_are_measured_exactly():
    """Epoch-ns times far apart, under several targets: too wide for one sort key (the
    merge then sorts by target and time as two keys)."""
    rng = random.Random(6)
    rows = []
    for _ in range(2000):
        start = rng.choice([0, 10**17, 10**18, 1_700_000_000 * 10**9]) + rng.randrange(0, 10**6)
        rows.append((*rng.choice(KEYS), start, start + rng.randrange(0, 10**5)))
    frame = pl.DataFrame(rows, schema={"layer": pl.String, "job": pl.String, "scope": pl.String,
                                       START: pl.Int64, END: pl.Int64}, orient="row")
    assert _store([frame]).union_lengths(_together) == _expected([frame], _together)


@pytest.mark.parametrize("spill", [False, True])
def test_a_store_dealt_by_time_range_measures_the_same_in_sum(monkeypatch, spill):
    """Each range's union, intervals cut at the bounds, adds up to the whole's (the Dask path
    measures a job's time across nodes this way), from memory or from files."""
    if spill:
        monkeypatch.setattr(runs_module, "SPILL_ROWS", 300)
    frames = _random_chunks(seed=5)
    store = _store(frames)
    whole = store.union_lengths(_together)
    bounds = np.array([np.iinfo(np.int64).min, 200_000, 250_000, 900_000, np.iinfo(np.int64).max])
    summed: dict = {}
    for piece in store.split(None, 4, bounds):
        for target, length in piece.union_lengths(_together).items():
            summed[target] = summed.get(target, 0) + length
    assert summed == whole


def test_a_store_dealt_by_key_keeps_each_keys_intervals_whole():
    """Dealt by key (the Dask path deals files this way): each piece holds only its keys, measured as before."""
    frames = _random_chunks(seed=6)
    store = _store(frames)
    whole = store.union_lengths(_per_key)
    layer_of = {code: 0 if key[0] == "SYSCALL" else 1 for code, key in enumerate(store.keys)}
    pieces = store.split(lambda codes, _starts: np.vectorize(layer_of.get)(codes), 2)
    assert [sorted(piece.keys, key=str) for piece in pieces] == [sorted(KEYS[:3], key=str), [KEYS[3]]]
    assert pieces[0].union_lengths(_per_key) | pieces[1].union_lengths(_per_key) == whole
