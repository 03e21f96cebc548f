"""The report's policy figures from attempt records (pure: no run, no server)."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.policy.test_executor import Script, run
from zerohop.analysis.latency.policy import summarise_policy
from zerohop.report.present_policy import policy_section

pytestmark = pytest.mark.unit

OOM = {"outcome": "stream_error:out_of_memory", "error_type": "out_of_memory",
       "output_tokens": 10}
FALLBACK = {"fallback": {"chain": ["medium", "small"]}}


def _frame(scripts: list[list[object]], policy: dict[str, object]) -> pd.DataFrame:
    rows = []
    for i, outcomes in enumerate(scripts):
        for record in run(policy, Script(outcomes)):  # type: ignore[arg-type]
            record.logical_request_id = f"L{i}"
            record.request_id = f"L{i}-{record.attempt}"
            record.sent_ts = 1000.0 + i + record.attempt * 0.1
            if record.outcome == "ok":
                record.output_tokens = 20
            rows.append(record.to_row())
    return pd.DataFrame(rows)


def test_amplification_success_and_fallback_shares() -> None:
    frame = _frame([["ok"], [OOM, "ok"], [OOM, OOM, "ok"], [OOM, OOM, OOM]], FALLBACK)
    s = summarise_policy(frame, window_s=10.0)
    assert s is not None
    assert (s.logical_requests, s.finished, s.attempts) == (4, 4, 9)
    assert s.amplification == pytest.approx(9 / 4)
    assert s.success_rate == pytest.approx(3 / 4)
    assert s.answered_share == pytest.approx({"large": 1 / 3, "medium": 1 / 3, "small": 1 / 3})
    assert s.give_up == {"chain_exhausted": 1}
    assert s.attempts_by_model == {"large": 4, "medium": 3, "small": 2}
    assert s.attempts_by_reason == {"first": 4, "fallback": 5}
    assert (s.output_tokens_answered, s.output_tokens_wasted) == (60, 60)
    x, y = s.amplification_series
    assert list(x) == [0.0] and list(y) == pytest.approx([9 / 4])
    context, charts = policy_section(s)
    assert context is not None and ("amplification", "2.25×") in context["rows"]
    assert [c.chart_id for c in charts] == ["policy-amplification"]


def test_latency_percentiles_include_failures_and_answered_separately() -> None:
    frame = _frame([["ok"]] * 99 + [[OOM, OOM, OOM]], FALLBACK)
    s = summarise_policy(frame)
    assert s is not None
    assert s.answered_e2e_p99_ms == pytest.approx(10.0)  # one 10 ms attempt each
    assert s.logical_e2e_p99_ms > s.answered_e2e_p99_ms  # the 3-attempt failure counts


def test_runs_without_policy_fields_have_no_section() -> None:
    plain = pd.DataFrame([{"request_id": "a", "outcome": "ok", "attempt": 1}])
    assert summarise_policy(plain) is None
    assert policy_section(None) == (None, [])
