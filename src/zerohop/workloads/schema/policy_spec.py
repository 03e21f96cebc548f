"""The client policy of a workload (`policy:`): timeouts, retries with backoff,
continuation of broken streams and a fallback chain of models.

`client/policy.py` executes it; this is what a workload file may say.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, field_validator, model_validator

from zerohop.workloads.schema.model_base import StrictModel

__all__ = [
    "MEMORY_ERROR",
    "BackoffSpec",
    "ContinuationSpec",
    "FallbackSpec",
    "FallbackStep",
    "Policy",
    "PolicyTimeouts",
    "RetrySpec",
]

MEMORY_ERROR = "memory_error"
"""The outcome pattern that names the engine's out-of-memory errors, whatever their
wire form (`stream_error:out_of_memory`, an HTTP 500 whose error says so). Wildcards
never match them: a policy retries or falls back on memory errors only when it says so."""

_OUTCOME_PATTERN = re.compile(
    r"^(?:\*|ok|connect_error|timeout_ttft|timeout_total|timeout_\*|stall|incomplete_stream|"
    r"protocol_error|cancelled|memory_error|http_[0-9*]{1,3}|stream_error:[A-Za-z0-9_.*-]+)$"
)


def _check_outcome_patterns(patterns: list[str]) -> list[str]:
    for pattern in patterns:
        if not _OUTCOME_PATTERN.match(pattern):
            raise ValueError(
                f"{pattern!r} is no outcome pattern (use an outcome such as http_429, stall, "
                "timeout_ttft, stream_error:<type>, a glob such as http_5*, timeout_* or "
                "stream_error:*, * for any failure, or memory_error)"
            )
        if pattern in ("ok", "cancelled"):
            raise ValueError(f"{pattern!r} is never retried (it is a success or the run's end)")
    return patterns


class PolicyTimeouts(StrictModel):
    """Client-side limits per attempt. A first token within `first_token_s` followed by a
    silence longer than `stall_s` is a `stall`, never a success."""

    first_token_s: float = Field(
        default=120.0, gt=0, description="Give up when no content arrives within this (s)."
    )
    stall_s: float = Field(
        default=60.0, gt=0, description="Give up when content stops for longer than this (s)."
    )
    total_s: float = Field(default=600.0, gt=0, description="Give up on the whole attempt (s).")

    @model_validator(mode="after")
    def _ordered(self) -> PolicyTimeouts:
        if self.first_token_s > self.total_s:
            raise ValueError(
                f"first_token_s ({self.first_token_s}) must be <= total_s ({self.total_s})"
            )
        return self


class BackoffSpec(StrictModel):
    """Wait before retry n: min(max_s, initial_s × multiplier^(n-1)), then jittered."""

    initial_s: float = Field(
        default=0.5, ge=0, description="Base wait before the first retry (s); 0: at once."
    )
    multiplier: float = Field(default=2.0, ge=1, description="Growth per further retry.")
    max_s: float = Field(default=20.0, ge=0, description="Longest wait between attempts (s).")
    jitter: Literal["none", "full", "equal"] = Field(
        default="full",
        description="`full`: uniform in [0, wait]; `equal`: wait/2 + uniform [0, wait/2]; "
        "`none`: exactly the wait (synchronised retry waves).",
    )

    @model_validator(mode="after")
    def _ordered(self) -> BackoffSpec:
        if self.max_s < self.initial_s:
            raise ValueError(f"max_s ({self.max_s}) must be >= initial_s ({self.initial_s})")
        return self


class RetrySpec(StrictModel):
    """When and how to send the same request again."""

    max_attempts: int = Field(
        default=3,
        ge=1,
        le=100,
        description="Attempts per model, the first included (1: never retry).",
    )
    outcomes: list[str] = Field(
        default_factory=lambda: ["http_429", "http_503", "http_529"],
        description="Outcomes to retry (globs allowed: http_5*, stream_error:*); memory errors "
        "only when `memory_error` is listed.",
    )
    backoff: BackoffSpec = Field(
        default_factory=BackoffSpec, description="Exponential backoff with jitter."
    )
    honour_retry_after: bool = Field(
        default=True, description="Wait at least the server's Retry-After (capped below)."
    )
    max_retry_after_s: float = Field(
        default=30.0, ge=0, description="Longest Retry-After honoured (s); longer: wait this."
    )
    max_in_flight: int | None = Field(
        default=None,
        gt=0,
        description="Cap on retries pending or in flight per user; over it, the request gives "
        "up instead of retrying. None: no cap.",
    )
    deadline_s: float | None = Field(
        default=None,
        gt=0,
        description="Give up when the logical request (all attempts and waits) would exceed "
        "this (s). None: no deadline.",
    )

    @field_validator("outcomes")
    @classmethod
    def _patterns(cls, value: list[str]) -> list[str]:
        return _check_outcome_patterns(value)


class ContinuationSpec(StrictModel):
    """After a stream that broke with content, one more attempt for the missing tokens
    (the transport keeps no text, so the prompt is resent with max_tokens = what is left:
    the load of a continuation, not its exact prompt)."""

    outcomes: list[str] = Field(
        default_factory=lambda: ["stall", "incomplete_stream"],
        description="Outcomes (after some content arrived) that get a continuation attempt.",
    )
    max_continuations: int = Field(
        default=1, ge=1, le=10, description="Continuation attempts per logical request."
    )

    @field_validator("outcomes")
    @classmethod
    def _patterns(cls, value: list[str]) -> list[str]:
        return _check_outcome_patterns(value)


class FallbackStep(StrictModel):
    """One model of a fallback chain, optionally asked for less."""

    model: str = Field(min_length=1, description="Model name to ask instead.")
    max_tokens: int | None = Field(
        default=None, gt=0, description="Cap on max_tokens for this model (None: unchanged)."
    )
    input_fraction: float | None = Field(
        default=None,
        gt=0,
        le=1,
        description="Keep this fraction of the prompt (its end: the most recent context); "
        "None: the whole prompt.",
    )


def _fallback_chain_shorthand(value: Any) -> Any:
    """`chain: [medium, small]` for `chain: [{model: medium}, {model: small}]`."""
    if isinstance(value, list):
        return [{"model": v} if isinstance(v, str) else v for v in value]
    return value


class FallbackSpec(StrictModel):
    """An ordered list of models to try when the current one fails in a given way."""

    outcomes: list[str] = Field(
        default_factory=lambda: [MEMORY_ERROR],
        description="Outcomes that move to the next model (default: memory errors).",
    )
    chain: Annotated[list[FallbackStep], BeforeValidator(_fallback_chain_shorthand)] = Field(
        min_length=1, description="Models to try in order after the workload's own model."
    )

    @field_validator("outcomes")
    @classmethod
    def _patterns(cls, value: list[str]) -> list[str]:
        return _check_outcome_patterns(value)


class Policy(StrictModel):
    """How the simulated client behaves when a request fails: its timeouts, retries,
    continuation and fallback chain. Absent sections: that behaviour is off."""

    timeouts: PolicyTimeouts | None = Field(
        default=None, description="Per-attempt limits (None: the run's --*-timeout flags)."
    )
    retry: RetrySpec | None = Field(default=None, description="Retries (None: never retry).")
    continuation: ContinuationSpec | None = Field(
        default=None, description="Continue a broken stream (None: never)."
    )
    fallback: FallbackSpec | None = Field(
        default=None, description="Fallback chain of models (None: no fallback)."
    )

