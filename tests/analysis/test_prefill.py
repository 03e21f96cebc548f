from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from zerohop.analysis.latency.prefill import fit_prefill

pytestmark = pytest.mark.unit


def _frame(tokens: np.ndarray, ttft: np.ndarray, workload: str = "w") -> pd.DataFrame:
    return pd.DataFrame(
        {
            "workload": pd.Categorical([workload] * tokens.size),
            "outcome": pd.Categorical(["ok"] * tokens.size),
            "input_tokens": tokens.astype(float),
            "ttft_ms": ttft,
        }
    )


def test_slope_is_recovered_despite_queueing_outliers() -> None:
    rng = np.random.default_rng(0)
    tokens = rng.integers(100, 8000, 4000).astype(float)
    ttft = 20.0 + 0.05 * tokens + rng.normal(0, 5, tokens.size)  # 50 ms per 1k tokens
    queued = rng.random(tokens.size) < 0.1
    ttft[queued] += rng.exponential(2000.0, queued.sum())  # 10 % waited in a queue
    [fit] = fit_prefill(_frame(tokens, ttft))
    assert fit.note is None
    assert fit.slope_ms_per_1k == pytest.approx(50.0, rel=0.05)
    low, high = fit.slope_ci_ms_per_1k
    assert low < 50.0 < high
    assert fit.points_tokens.size == 1500  # plot subsample
    # least squares would be dragged far off by the outliers: the test can fail
    ols = np.polyfit(tokens / 1000.0, ttft, 1)[0]
    assert abs(ols - 50.0) > abs(fit.slope_ms_per_1k - 50.0)


def test_constant_prompt_length_gives_a_note_not_a_slope() -> None:
    tokens = np.full(50, 512.0)
    [fit] = fit_prefill(_frame(tokens, np.linspace(10, 20, 50)))
    assert np.isnan(fit.slope_ms_per_1k)
    assert fit.note is not None and "512" in fit.note
