"""Numbers → the text a reader sees. Templates print these strings as they are, so
every rounding decision lives here, once."""

from __future__ import annotations

import math
from typing import TypeGuard

DASH = "—"


def ms(value: float | None) -> str:
    """Latency in ms with about three significant digits: 0.412, 12.3, 1,234."""
    if not _finite(value):
        return DASH
    magnitude = abs(value)
    if magnitude >= 100:
        return f"{value:,.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def signed_ms(value: float | None) -> str:
    if not _finite(value):
        return DASH
    return ("+" if value > 0 else "") + ms(value)


def count(value: float | None) -> str:
    if not _finite(value):
        return DASH
    return f"{round(value):,}"


def rate(value: float | None) -> str:
    """Per-second rates: 1,234 / 12.3 / 0.412."""
    return ms(value)


def pct(value: float | None, digits: int = 1) -> str:
    if not _finite(value):
        return DASH
    return f"{value:.{digits}f} %"


def signed_pct(value: float | None) -> str:
    if not _finite(value):
        return DASH
    return f"{value:+.1f} %"


def number(value: float | None) -> str:
    """Any other figure, 4 significant digits (1.235e+09 for large values)."""
    if not _finite(value):
        return DASH
    if value != 0 and (abs(value) >= 1e6 or abs(value) < 1e-3):
        return f"{value:.4g}"
    return f"{value:,.4g}" if abs(value) >= 1000 else f"{value:.4g}"


def seconds(value: float | None) -> str:
    """Durations: 950 ms, 12.5 s, 3 min 20 s, 1 h 05 min."""
    if not _finite(value):
        return DASH
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 120:
        return f"{value:.1f} s"
    minutes, secs = divmod(round(value), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def gbps(value: float | None) -> str:
    if not _finite(value):
        return DASH
    return f"{value:.2f} GB/s"


def interval(low: float | None, high: float | None, fmt: str = "ms") -> str:
    """`[−1.2, +3.4]` in the given format."""
    if not (_finite(low) and _finite(high)):
        return DASH
    render = signed_ms if fmt == "ms" else signed_pct
    return f"[{render(low)}, {render(high)}]"


def _finite(value: float | None) -> TypeGuard[float]:
    """A number to print; the type guard lets each formatter use `value` as a float."""
    return value is not None and isinstance(value, int | float) and math.isfinite(value)
