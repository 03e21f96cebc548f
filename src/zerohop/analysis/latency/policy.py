"""Client policies in the report: what retries and fallbacks cost and what they bought.

Pure functions over `requests.parquet` (one row per attempt). A logical request is the
rows sharing `logical_request_id`; its final attempt carries `final_outcome`,
`logical_e2e_ms` and `answered_by` (see `zerohop.client.policy`). Figures: amplification
(attempts per logical request) overall and over time, logical success rate and latency,
the share each model answered, why requests gave up, and the load the policy put on the
server (attempts and tokens per model, tokens spent on attempts that answered nothing).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

LOGICAL_COLUMNS = ("final_outcome", "logical_e2e_ms", "attempt")


@dataclass
class PolicySummary:
    logical_requests: int  # logical requests started (each has exactly one attempt 1)
    finished: int  # ... with a final attempt recorded
    answered: int  # ... whose final outcome is ok
    attempts: int
    amplification: float  # attempts ÷ logical requests started
    success_rate: float  # answered ÷ finished
    logical_e2e_p50_ms: float
    logical_e2e_p99_ms: float  # over every finished logical request
    answered_e2e_p99_ms: float  # over the answered ones
    logical_ttft_p99_ms: float
    answered_share: dict[str, float]  # model → share of the answered
    give_up: dict[str, int]  # reason → logical requests
    attempts_by_model: dict[str, int]
    attempts_by_reason: dict[str, int]
    output_tokens_answered: int  # tokens of the attempts that answered
    output_tokens_wasted: int  # tokens streamed by attempts that answered nothing
    amplification_series: tuple[np.ndarray, np.ndarray] = field(
        default_factory=lambda: (np.array([]), np.array([]))
    )  # (window start s since the first send, attempts ÷ first attempts in the window)


def summarise_policy(requests: pd.DataFrame, window_s: float = 2.0) -> PolicySummary | None:
    """None when the run has no logical-request fields (no policy executor ran)."""
    finals = final_attempts(requests)
    if finals is None or finals.empty:
        return None
    started = int((pd.to_numeric(requests["attempt"], errors="coerce").fillna(1) == 1).sum())
    answered = finals[finals["final_outcome"] == "ok"]
    answered_by = answered["answered_by"].fillna("?").value_counts()
    ok_attempt = requests["outcome"] == "ok"
    tokens = pd.to_numeric(requests.get("output_tokens"), errors="coerce").fillna(0)
    return PolicySummary(
        logical_requests=started,
        finished=len(finals),
        answered=len(answered),
        attempts=len(requests),
        amplification=len(requests) / started if started else float("nan"),
        success_rate=len(answered) / len(finals),
        logical_e2e_p50_ms=_pct(finals["logical_e2e_ms"], 50),
        logical_e2e_p99_ms=_pct(finals["logical_e2e_ms"], 99),
        answered_e2e_p99_ms=_pct(answered["logical_e2e_ms"], 99),
        logical_ttft_p99_ms=_pct(answered.get("logical_ttft_ms", pd.Series(dtype=float)), 99),
        answered_share={str(k): float(v) / len(answered) for k, v in answered_by.items()},
        give_up=_counts(finals.get("give_up_reason", pd.Series(dtype=object)).dropna()),
        attempts_by_model={str(k): int(v) for k, v in requests["model"].value_counts().items()},
        attempts_by_reason={
            str(k): int(v)
            for k, v in requests.get("attempt_reason", pd.Series(dtype=object))
            .fillna("first").value_counts().items()
        },
        output_tokens_answered=int(tokens[ok_attempt].sum()),
        output_tokens_wasted=int(tokens[~ok_attempt].sum()),
        amplification_series=_amplification_over_time(requests, window_s),
    )


def final_attempts(requests: pd.DataFrame) -> pd.DataFrame | None:
    """The final attempt of every finished logical request: the row that carries its
    outcome, latency (waits included) and the model that answered. None when the run
    has no logical-request fields."""
    if any(c not in requests.columns for c in LOGICAL_COLUMNS) or requests.empty:
        return None
    return requests[requests["final_outcome"].notna()]


def _pct(values: pd.Series, q: float) -> float:
    arr = pd.to_numeric(values, errors="coerce").dropna().to_numpy(dtype=float)
    return float(np.percentile(arr, q)) if arr.size else float("nan")


def _counts(values: pd.Series) -> dict[str, int]:
    return {str(k): int(v) for k, v in values.value_counts().items()}


def _amplification_over_time(
    requests: pd.DataFrame, window_s: float
) -> tuple[np.ndarray, np.ndarray]:
    sent = pd.to_numeric(requests["sent_ts"], errors="coerce")
    mask = sent.notna()
    if not mask.any():
        return np.array([]), np.array([])
    t = (sent[mask] - sent[mask].min()).to_numpy(dtype=float)
    attempt = pd.to_numeric(requests.loc[mask, "attempt"], errors="coerce").fillna(1)
    first = (attempt == 1).to_numpy()
    bins = np.floor(t / window_s).astype(int)
    n = int(bins.max()) + 1
    attempts = np.bincount(bins, minlength=n).astype(float)
    firsts = np.bincount(bins[first], minlength=n).astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(firsts > 0, attempts / firsts, np.nan)
    return np.arange(n) * window_s, ratio
