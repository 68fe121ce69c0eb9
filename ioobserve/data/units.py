"""Numbers for people: bytes, rates, counts and durations, in one style everywhere (a leaf module)."""

from __future__ import annotations

BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def format_bytes(n: float) -> str:
    """Binary units: 0 B, 512 B, 1.5 KiB, 3.2 GiB."""
    value = float(n)
    for unit in BYTE_UNITS:
        if abs(value) < 1024 or unit == BYTE_UNITS[-1]:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def format_rate(n: float) -> str:
    """Bytes per second: 1.5 GiB/s."""
    return f"{format_bytes(n)}/s"


def format_count(n: float) -> str:
    """999, 12.3k, 4.5M, 1.2G."""
    value = float(n)
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= limit:
            return f"{value / limit:.1f}{suffix}"
    return f"{value:.1f}" if value < 10 and value != int(value) else f"{value:.0f}"


def format_seconds(seconds: float) -> str:
    """850 µs, 12.5 ms, 3.20 s, 2 min 5 s."""
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.1f} ms"
    if seconds < 60:
        return f"{seconds:.2f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"
