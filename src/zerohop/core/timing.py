"""The timing formulas of a request, written once: the live client (`client/measure.py`,
`client/llm_client.py`) applies them to perf_counter_ns stamps, the virtual clock
(`fleet/outcomes.py`) to its virtual nanoseconds, so both mean the same by TTFT, ITL,
TPOT and E2E (docs/design.md, "Metrics"). Pure arithmetic: no clock is read here.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

NS_PER_MS = 1e6


def ms_between(start_ns: int, end_ns: int) -> float:
    """Milliseconds from `start_ns` to `end_ns`."""
    return (end_ns - start_ns) / NS_PER_MS


def ttft_ms(sent_ns: int, first_content_ns: int) -> float:
    """Time to first token: the send → the first read that carried content."""
    return ms_between(sent_ns, first_content_ns)


def e2e_ms(sent_ns: int, end_ns: int) -> float:
    """End to end: the send → the end of the stream."""
    return ms_between(sent_ns, end_ns)


def itl_ms(content_ns: Sequence[int]) -> list[float]:
    """Inter-token latency: the gaps between the stamps of successive content events
    (the events of one read share its stamp: their gaps are 0)."""
    return [ms_between(a, b) for a, b in pairwise(content_ns)]


def tpot_ms(e2e: float | None, ttft: float | None, output_tokens: int | None) -> float | None:
    """Time per output token: (e2e − ttft) ÷ (output tokens − 1); None without both
    latencies or for an answer of fewer than 2 tokens."""
    if e2e is None or ttft is None or output_tokens is None or output_tokens < 2:
        return None
    return (e2e - ttft) / (output_tokens - 1)


def schedule_lag_ms(scheduled_ns: int, sent_ns: int, queue_wait_ns: int | None) -> float:
    """How late an open loop sent once it could: sent − (scheduled + the wait for a
    --max-concurrency slot)."""
    return ms_between(scheduled_ns + (queue_wait_ns or 0), sent_ns)
