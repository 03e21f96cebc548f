"""A hop that changes the stream is named against the same run's direct requests: a
buffering hop (every event in one read, the first token at the end) is CHANGED with its
reasons; a hop that only adds a little latency is not."""

from __future__ import annotations

from typing import Any

import pytest

from tests.analysis.test_arms import T0, run_of
from zerohop.analysis.comparison.arms import arm_views
from zerohop.analysis.latency.stream_shape import stream_shapes

pytestmark = pytest.mark.unit

TOKENS = 16
ITL_MS = 8.0


def rows_for(arm: str, n: int, *, buffered: bool, extra_ms: float) -> list[dict[str, Any]]:
    rows = []
    for i in range(n):
        ttft = 20.0 + extra_ms + (TOKENS - 1) * ITL_MS * buffered
        itl = [0.0] * (TOKENS - 1) if buffered else [ITL_MS] * (TOKENS - 1)
        rows.append({"request_id": f"{arm}-{i}", "workload": "flood", "outcome": "ok",
                     "arm": arm, "sent_ts": T0 + i, "end_ts": T0 + i + 0.2,
                     "ttft_ms": ttft, "e2e_ms": 20.0 + extra_ms + (TOKENS - 1) * ITL_MS,
                     "itl_ms": itl, "input_tokens": 32, "output_tokens": TOKENS})
    return rows


def test_buffering_hop_changed_and_plain_hop_unchanged() -> None:
    rows = (rows_for("direct", 40, buffered=False, extra_ms=0.0)
            + rows_for("plain", 40, buffered=False, extra_ms=0.5)
            + rows_for("gzip", 40, buffered=True, extra_ms=0.5))
    shapes = {s.arm: s for s in stream_shapes(arm_views(run_of(rows, 40.0)))}
    assert set(shapes) == {"plain", "gzip"}
    assert not shapes["plain"].changed and shapes["plain"].reasons == ()
    gzip = shapes["gzip"]
    assert gzip.changed and gzip.tokens_per_read == pytest.approx(TOKENS)
    assert gzip.direct_tokens_per_read == pytest.approx(1.0)
    assert gzip.same_read_pct == pytest.approx(100.0) and gzip.direct_same_read_pct == 0.0
    assert gzip.first_token_shift == pytest.approx((TOKENS - 1) * ITL_MS / 120.0, abs=0.01)
    assert len(gzip.reasons) == 3 and "flush" in gzip.reasons[2]


def test_no_direct_arm_no_verdict() -> None:
    rows = rows_for("plain", 10, buffered=False, extra_ms=0.0)
    assert stream_shapes(arm_views(run_of(rows, 10.0))) == []
