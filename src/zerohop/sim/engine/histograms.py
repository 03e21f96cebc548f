"""Small counting structures the engine updates on its hot path.

`BucketHistogram` is a Prometheus histogram (cumulative buckets, sum, count).
`LagRecorder` keeps a microsecond-resolution histogram of lags so the emission-lag
percentiles (p50/p99/max) are exact to 1 µs up to 50 ms without storing samples.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

# vLLM's buckets for vllm:time_to_first_token_seconds (as vLLM's v1 engine exports them).
TTFT_BUCKETS_S: tuple[float, ...] = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)
# vLLM's buckets for inter-token latency / time per output token.
ITL_BUCKETS_S: tuple[float, ...] = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
# vLLM's request-latency buckets (e2e, queue time).
REQUEST_LATENCY_BUCKETS_S: tuple[float, ...] = (
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
)
LAG_BUCKETS_S: tuple[float, ...] = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.002,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    1.0,
)


class BucketHistogram:
    def __init__(self, buckets: Sequence[float]) -> None:
        self.buckets = tuple(buckets)
        self.counts = [0] * (len(self.buckets) + 1)  # last: +Inf
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.sum += value
        self.count += 1

    def observe_n(self, value: float, n: int) -> None:
        """`n` observations of the same value (a step's worth of equal gaps)."""
        self.counts[bisect.bisect_left(self.buckets, value)] += n
        self.sum += value * n
        self.count += n

    def cumulative(self) -> list[tuple[str, int]]:
        """(le label, cumulative count) pairs, ending with +Inf."""
        out: list[tuple[str, int]] = []
        running = 0
        for bound, n in zip(self.buckets, self.counts, strict=False):
            running += n
            out.append((repr(float(bound)), running))
        out.append(("+Inf", running + self.counts[-1]))
        return out


class LagRecorder:
    """Lags in µs: exact counts below `limit_us`, the rest kept as raw values."""

    def __init__(self, limit_us: int = 50_000) -> None:
        self.limit_us = limit_us
        self.counts = [0] * limit_us
        self.overflow: list[int] = []
        self.n = 0
        self.total_us = 0
        self.max_us = 0

    def add_ns(self, lag_ns: int) -> None:
        us = lag_ns // 1000 if lag_ns > 0 else 0
        if us < self.limit_us:
            self.counts[us] += 1
        else:
            self.overflow.append(us)
        self.n += 1
        self.total_us += us
        if us > self.max_us:
            self.max_us = us

    def add_written(self, written_ns: list[int], due_ns: int) -> None:
        """`add_ns(w - due_ns)` for each w in `written_ns` but the zeros (not written)."""
        counts, limit = self.counts, self.limit_us
        n = total = 0
        top = self.max_us
        for w in written_ns:
            if w:
                us = (w - due_ns) // 1000 if w > due_ns else 0
                if us < limit:
                    counts[us] += 1
                else:
                    self.overflow.append(us)
                n += 1
                total += us
                if us > top:
                    top = us
        self.n += n
        self.total_us += total
        self.max_us = top

    def reset(self) -> None:
        self.counts = [0] * self.limit_us
        self.overflow = []
        self.n = self.total_us = self.max_us = 0

    def percentile_us(self, q: float) -> float:
        """Nearest-rank percentile (q in 0..100) in µs; 0 when empty."""
        if self.n == 0:
            return 0.0
        rank = max(1, -(-int(q * self.n) // 100)) if q < 100 else self.n
        seen = 0
        for us, c in enumerate(self.counts):
            seen += c
            if seen >= rank:
                return float(us)
        rest = sorted(self.overflow)
        return float(rest[rank - seen - 1])

    def summary_ms(self) -> dict[str, float]:
        return {
            "n": float(self.n),
            "mean_ms": (self.total_us / self.n / 1000.0) if self.n else 0.0,
            "p50_ms": self.percentile_us(50) / 1000.0,
            "p90_ms": self.percentile_us(90) / 1000.0,
            "p99_ms": self.percentile_us(99) / 1000.0,
            "p999_ms": self.percentile_us(99.9) / 1000.0,
            "max_ms": self.max_us / 1000.0,
        }
