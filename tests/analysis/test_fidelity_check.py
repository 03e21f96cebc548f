"""The join of the client's records with the target's ground truth, and the errors it
yields, on tables built in memory with known offsets."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from zerohop.analysis.client.fidelity_check import ErrorStats, joined_requests, timing_errors

pytestmark = pytest.mark.unit

T0 = 1_700_000_000.0
GAP_S = 0.010
TOKENS = 5


def tables(n: int = 100, *, ttft_late_s: float = 0.0002, end_late_s: float = 0.0001,
           gap_late_s: float = 0.0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """n requests, one a second apart from T0: the server writes TOKENS tokens GAP_S
    apart; the client sees the first `ttft_late_s` late, the end `end_late_s` late and
    every gap `gap_late_s` longer."""
    client, truth = [], []
    for i in range(n):
        sent = T0 + i
        first = sent + 0.05
        written = [first + k * GAP_S for k in range(TOKENS)]
        truth.append({"request_id": f"r{i}", "outcome": "ok", "first_token_ts": written[0],
                      "last_token_ts": written[-1], "token_ts": written})
        client.append({"request_id": f"r{i}", "outcome": "ok", "sent_ts": sent,
                       "first_content_ts": first + ttft_late_s,
                       "end_ts": written[-1] + end_late_s, "content_events": TOKENS,
                       "itl_ms": np.full(TOKENS - 1, (GAP_S + gap_late_s) * 1e3)})
    return pd.DataFrame(client), pd.DataFrame(truth)


def test_errors_are_client_minus_server_in_ms() -> None:
    client, truth = tables(ttft_late_s=0.0002, end_late_s=0.0001, gap_late_s=0.0003)
    errors = timing_errors(client, truth)
    assert errors.requests == 100
    assert errors.tokens == 100 * TOKENS
    assert errors.ttft_p99_ms == pytest.approx(0.2, abs=1e-3)
    assert errors.e2e_p99_ms == pytest.approx(0.1, abs=1e-3)
    assert errors.itl_p99_ms == pytest.approx(0.3, abs=1e-3)
    assert errors.itl_unpaired == 0
    assert errors.late_gaps_by_position == ()  # no gap is more than 1 ms off


def test_p99_is_of_the_magnitude_and_min_keeps_the_sign() -> None:
    client, truth = tables()
    client.loc[:4, "first_content_ts"] -= 0.003  # five reads stamped 2.8 ms before the write
    errors = timing_errors(client, truth)
    assert errors.ttft.min_ms == pytest.approx(-2.8, abs=1e-3)
    assert errors.ttft_p99_ms > 2.0  # a client early by 2.8 ms is 2.8 ms wrong


def test_one_late_request_in_a_hundred_sets_the_p99_tail() -> None:
    client, truth = tables(n=200)
    client.loc[[10, 20, 30, 40], "first_content_ts"] += 0.008
    errors = timing_errors(client, truth)
    assert errors.ttft.p50_ms == pytest.approx(0.2, abs=1e-3)
    assert errors.ttft_p99_ms > 5.0
    assert errors.ttft.max_ms == pytest.approx(8.2, abs=1e-3)


def test_only_requests_ok_on_both_sides_and_after_the_warmup_count() -> None:
    client, truth = tables(n=10)
    client.loc[3, "outcome"] = "error"
    truth.loc[4, "outcome"] = "cancelled"
    joined = joined_requests(client, truth, warmup_s=1.5)  # sends at T0 and T0+1 are warm-up
    assert sorted(joined["request_id"]) == ["r2", "r5", "r6", "r7", "r8", "r9"]
    assert timing_errors(client, truth, warmup_s=1.5).requests == 6


def test_a_request_the_truth_does_not_know_is_left_out() -> None:
    client, truth = tables(n=10)
    errors = timing_errors(client, truth.iloc[:7])
    assert errors.requests == 7


def test_gaps_that_cannot_be_paired_are_counted_not_guessed() -> None:
    client, truth = tables(n=10)
    client.at[2, "content_events"] = TOKENS - 1  # two tokens came as one event
    client.at[5, "itl_ms"] = np.array([10.0])  # fewer gaps than tokens written
    errors = timing_errors(client, truth)
    assert errors.itl_unpaired == 2
    assert errors.itl.n == 8 * (TOKENS - 1)
    assert errors.requests == 10  # their TTFT and E2E are still judged


def test_late_gaps_are_counted_by_their_place_in_the_stream() -> None:
    client, truth = tables(n=10)
    for i in (1, 2, 3):
        gaps = np.full(TOKENS - 1, GAP_S * 1e3)
        gaps[0] += 4.0  # the first gap, prefill to decode, 4 ms long
        client.at[i, "itl_ms"] = gaps
    errors = timing_errors(client, truth)
    assert errors.late_gaps_by_position == (3,)
    assert errors.late_gaps == 3


def test_without_per_token_times_there_are_no_itl_errors() -> None:
    client, truth = tables(n=10)
    errors = timing_errors(client, truth.drop(columns=["token_ts"]))
    assert errors.itl.n == 0 and math.isnan(errors.itl_p99_ms)
    assert errors.ttft_p99_ms == pytest.approx(0.2, abs=1e-3)


def test_nothing_to_join_gives_nan_figures_and_zero_requests() -> None:
    client, truth = tables(n=3)
    errors = timing_errors(client, truth.iloc[0:0])
    assert errors.requests == 0 and math.isnan(errors.ttft_p99_ms)
    assert ErrorStats.of(np.array([math.nan])).n == 0


def test_tokens_written_while_the_clients_core_was_taken_are_counted_not_judged() -> None:
    client, truth = tables(n=200, ttft_late_s=0.0002)
    late = [10, 20, 30, 40]  # the client was away when these requests' first tokens came
    client.loc[late, "first_content_ts"] += 0.008
    away = [(truth.loc[i, "first_token_ts"] - 1e-4, truth.loc[i, "first_token_ts"] + 1e-4)
            for i in late]
    assert timing_errors(client, truth).ttft_p99_ms > 5.0
    errors = timing_errors(client, truth, unavailable=away)
    assert errors.ttft_p99_ms == pytest.approx(0.2, abs=1e-3)
    assert errors.ttft.n == 196
    assert errors.unjudged_tokens == 4  # the first token of each, nothing after it
    assert errors.itl.n == 200 * (TOKENS - 1) - 4  # the gap after each first token
