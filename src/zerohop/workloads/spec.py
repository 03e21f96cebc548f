"""Workload specs: the one strict model behind every `workloads/*.yaml` file.

A file holds one workload or `workloads: [...]`. Every model forbids unknown keys, the
kinds of workload, load, distribution, arrival and rate shape are discriminated unions,
and every field carries a description (it becomes CLI/Locust flag help and docs).
`load_workload_file` turns any validation failure into ONE `WorkloadError` that names the
file and the field path, e.g. `all.yaml: workloads[1].load.rate_rps: must be > 0`.
Paths to traces are resolved while validating (`${VAR:-default}` expansion, relative to
the YAML's folder), so the validated spec is final and never patched afterwards.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, Literal

import numpy as np
import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from zerohop.workloads.adapters import AdapterSet, adapters_shorthand
from zerohop.workloads.data_paths import builtin_path_variable

__all__ = [
    "KIND_CLASS_NAMES",
    "MEMORY_ERROR",
    "AdapterSet",
    "ApiName",
    "BackoffSpec",
    "ClosedLoad",
    "ConstantArrival",
    "ContinuationSpec",
    "Distribution",
    "FallbackSpec",
    "FallbackStep",
    "FixedDist",
    "GammaArrival",
    "LognormalDist",
    "LongContextSpec",
    "LoraMixSpec",
    "NormalDist",
    "OpenLoad",
    "PiecewiseShape",
    "PoissonArrival",
    "Policy",
    "PolicyTimeouts",
    "RampShape",
    "RetrySpec",
    "ShortQueryFloodSpec",
    "SloSpec",
    "SpikeShape",
    "StepShape",
    "TokenScaling",
    "TraceLoad",
    "TraceReplaySpec",
    "WorkloadError",
    "WorkloadFile",
    "WorkloadSpec",
    "load_workload_file",
    "parse_workloads",
]


class WorkloadError(ValueError):
    """A workload file (or a trace it points at) that cannot be used; the message names
    the file and the field path or line, and is meant to be shown as is (exit 2)."""


# ---------------------------------------------------------------------------------------
# public entry points
# ---------------------------------------------------------------------------------------
def load_workload_file(path: Path) -> WorkloadFile:
    """Read and validate one YAML workload file (one workload, or `workloads: [...]`)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise WorkloadError(f"{path}: cannot read workload file: {exc.strerror or exc}") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise WorkloadError(f"{path}:{where}: invalid YAML: {problem}") from exc
    return parse_workloads(data, source=path, base_dir=path.resolve().parent)


def parse_workloads(
    data: Any, *, source: Path | str = "<workloads>", base_dir: Path | None = None
) -> WorkloadFile:
    """Validate already-parsed YAML data; relative trace paths resolve against base_dir
    (default: the current directory)."""
    context = {"base_dir": Path(base_dir) if base_dir is not None else Path.cwd()}
    if data is None:
        raise WorkloadError(f"{source}: empty workload file (expected a workload or `workloads:`)")
    if not isinstance(data, Mapping):
        raise WorkloadError(
            f"{source}: expected a mapping (one workload, or `workloads: [...]`), "
            f"got {type(data).__name__}"
        )
    try:
        if "workloads" in data:
            return WorkloadFile.model_validate(data, context=context)
        single = _WORKLOAD_ADAPTER.validate_python(data, context=context)
    except ValidationError as exc:
        raise WorkloadError(f"{source}: {_describe_first_error(exc, data)}") from None
    return WorkloadFile(workloads=[single])


# ---------------------------------------------------------------------------------------
# building blocks
# ---------------------------------------------------------------------------------------
class StrictModel(BaseModel):
    """Unknown keys are errors, and a validated spec never changes afterwards."""

    model_config = ConfigDict(extra="forbid", frozen=True)


ApiName = Literal["openai-chat", "openai-completions", "anthropic"]

_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"


def _tag_shorthand(tag_key: str) -> Any:
    """Let YAML say `arrival: poisson` for `arrival: {type: poisson}`."""

    def convert(value: Any) -> Any:
        return {tag_key: value} if isinstance(value, str) else value

    return BeforeValidator(convert)


def _fixed_shorthand(value: Any) -> Any:
    """Let YAML say `max_tokens: 64` for `max_tokens: {type: fixed, value: 64}`."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return {"type": "fixed", "value": value}
    return value


# --- token-count distributions -----------------------------------------------------------
class _DistBase(StrictModel):
    def bounds(self) -> tuple[int, int | None]:
        raise NotImplementedError

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """`size` integer draws (int64), clipped to the distribution's bounds."""
        raise NotImplementedError

    def sample_one(self, rng: np.random.Generator) -> int:
        return int(self.sample(rng, 1)[0])


class FixedDist(_DistBase):
    """Always the same count."""

    type: Literal["fixed"] = Field(description="Distribution kind: always `value`.")
    value: int = Field(gt=0, description="The token count.")

    def bounds(self) -> tuple[int, int | None]:
        return self.value, self.value

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return np.full(size, self.value, dtype=np.int64)


class UniformDist(_DistBase):
    """Integers uniformly between min and max, both included."""

    type: Literal["uniform"] = Field(description="Distribution kind: uniform integers.")
    min: int = Field(gt=0, description="Smallest count (included).")
    max: int = Field(gt=0, description="Largest count (included).")

    @model_validator(mode="after")
    def _ordered(self) -> UniformDist:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) must be <= max ({self.max})")
        return self

    def bounds(self) -> tuple[int, int | None]:
        return self.min, self.max

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return rng.integers(self.min, self.max + 1, size=size, dtype=np.int64)


class _BoundedDist(_DistBase):
    min: int = Field(default=1, gt=0, description="Draws below this are raised to it.")
    max: int | None = Field(
        default=None, gt=0, description="Draws above this are lowered to it (none: unbounded)."
    )

    @model_validator(mode="after")
    def _ordered(self) -> _BoundedDist:
        if self.max is not None and self.min > self.max:
            raise ValueError(f"min ({self.min}) must be <= max ({self.max})")
        return self

    def bounds(self) -> tuple[int, int | None]:
        return self.min, self.max

    def _clip(self, draws: np.ndarray) -> np.ndarray:
        upper = self.max if self.max is not None else np.iinfo(np.int64).max // 2
        return np.clip(np.rint(draws), self.min, upper).astype(np.int64)


class NormalDist(_BoundedDist):
    """Normal in token counts, rounded and clipped to [min, max]."""

    type: Literal["normal"] = Field(description="Distribution kind: normal, clipped.")
    mean: float = Field(gt=0, description="Mean token count.")
    std: float = Field(ge=0, description="Standard deviation in tokens.")

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return self._clip(rng.normal(self.mean, self.std, size=size))


class LognormalDist(_BoundedDist):
    """Log-normal (long right tail, like real prompt lengths), rounded and clipped."""

    type: Literal["lognormal"] = Field(description="Distribution kind: log-normal, clipped.")
    median: float = Field(gt=0, description="Median token count (exp of the log-mean).")
    sigma: float = Field(ge=0, description="Standard deviation of the natural log of the count.")

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return self._clip(rng.lognormal(float(np.log(self.median)), self.sigma, size=size))


Distribution = Annotated[
    FixedDist | UniformDist | NormalDist | LognormalDist,
    Field(discriminator="type"),
    BeforeValidator(_fixed_shorthand),
]
"""A token-count distribution; a bare integer means `fixed`."""


# --- arrivals and rate shapes --------------------------------------------------------------
class PoissonArrival(StrictModel):
    """Exponential inter-arrival gaps (CV = 1): independent users."""

    type: Literal["poisson"] = Field(description="Arrival kind: Poisson.")


class GammaArrival(StrictModel):
    """Gamma inter-arrival gaps with a chosen coefficient of variation: CV > 1 is bursty,
    CV < 1 is more regular than Poisson."""

    type: Literal["gamma"] = Field(description="Arrival kind: gamma renewal process.")
    cv: float = Field(
        gt=0, le=20, description="Coefficient of variation of the gaps (1 = Poisson)."
    )


class ConstantArrival(StrictModel):
    """Evenly spaced arrivals (CV = 0)."""

    type: Literal["constant"] = Field(description="Arrival kind: fixed gaps of 1/rate.")


Arrival = Annotated[
    PoissonArrival | GammaArrival | ConstantArrival,
    Field(discriminator="type"),
    _tag_shorthand("type"),
]


class RampShape(StrictModel):
    """The rate moves linearly from `from_multiplier` to `to_multiplier` × rate_rps."""

    type: Literal["ramp"] = Field(description="Shape kind: linear ramp.")
    from_multiplier: float = Field(default=0.0, ge=0, description="Multiplier before start_s.")
    to_multiplier: float = Field(
        default=1.0, ge=0, description="Multiplier from the ramp's end on."
    )
    start_s: float = Field(default=0.0, ge=0, description="When the ramp starts (s from start).")
    duration_s: float = Field(gt=0, description="How long the ramp takes (s).")


class StepPoint(StrictModel):
    """From `at_s` on, the rate is `multiplier` × rate_rps."""

    at_s: float = Field(ge=0, description="When this step begins (s from start).")
    multiplier: float = Field(ge=0, description="Multiplier of rate_rps from at_s on.")


class StepShape(StrictModel):
    """Piecewise constant multipliers: 1× until the first step."""

    type: Literal["step"] = Field(description="Shape kind: steps.")
    steps: list[StepPoint] = Field(min_length=1, description="Steps in increasing at_s.")

    @field_validator("steps")
    @classmethod
    def _increasing(cls, steps: list[StepPoint]) -> list[StepPoint]:
        _require_increasing([s.at_s for s in steps], "steps")
        return steps


class SpikeShape(StrictModel):
    """1× rate, then `peak_multiplier` × rate for `duration_s` from `at_s`, then 1× again."""

    type: Literal["spike"] = Field(description="Shape kind: one spike.")
    peak_multiplier: float = Field(gt=0, description="Multiplier during the spike (e.g. 4).")
    at_s: float = Field(ge=0, description="When the spike starts (s from start).")
    duration_s: float = Field(gt=0, description="How long the spike lasts (s).")


class PiecewisePoint(StrictModel):
    """A knot of a piecewise-linear multiplier curve."""

    at_s: float = Field(ge=0, description="Time of the knot (s from start).")
    multiplier: float = Field(ge=0, description="Multiplier of rate_rps at that time.")


class PiecewiseShape(StrictModel):
    """Any curve: multipliers at knots, linearly interpolated, held after the last knot."""

    type: Literal["piecewise"] = Field(description="Shape kind: piecewise-linear knots.")
    points: list[PiecewisePoint] = Field(
        min_length=1, description="Knots in increasing at_s; before the first knot its value."
    )

    @field_validator("points")
    @classmethod
    def _increasing(cls, points: list[PiecewisePoint]) -> list[PiecewisePoint]:
        _require_increasing([p.at_s for p in points], "points")
        return points


Shape = Annotated[
    RampShape | StepShape | SpikeShape | PiecewiseShape, Field(discriminator="type")
]


def _require_increasing(times: Sequence[float], what: str) -> None:
    for earlier, later in itertools.pairwise(times):
        if later <= earlier:
            raise ValueError(
                f"{what} must be in strictly increasing at_s ({later} after {earlier})"
            )


# --- load models -------------------------------------------------------------------------
class ClosedLoad(StrictModel):
    """Closed loop: a fixed number of users, each sending its next request when the
    previous one ends (plus think time). Concurrency is the knob; the rate follows."""

    kind: Literal["closed"] = Field(description="Load kind: closed loop (concurrency).")
    users: int = Field(default=1, gt=0, description="Concurrent users of this workload.")
    think_time_s: float = Field(
        default=0.0, ge=0, description="Pause between a response's end and the next request (s)."
    )
    think_time: Literal["constant", "exponential"] = Field(
        default="constant",
        description="`constant`: exactly think_time_s; `exponential`: random with that mean.",
    )


class OpenLoad(StrictModel):
    """Open loop: arrivals follow a clock, not the responses, so a slow server builds a
    queue instead of slowing the load (no coordinated omission)."""

    kind: Literal["open"] = Field(description="Load kind: open loop (arrival rate).")
    rate_rps: float = Field(gt=0, description="Total arrival rate over all workers (req/s).")
    arrival: Arrival = Field(
        default_factory=lambda: PoissonArrival(type="poisson"),
        description="Inter-arrival process: poisson | gamma (with cv) | constant.",
    )
    max_in_flight: int | None = Field(
        default=None,
        gt=0,
        description="Cap on requests in flight (all workers); arrivals over it are dropped "
        "and counted. None: no cap.",
    )
    shape: Shape | None = Field(
        default=None,
        description="Rate over time as multipliers of rate_rps: ramp | step | spike | "
        "piecewise. None: constant.",
    )


class TraceLoad(StrictModel):
    """Arrivals at the trace's own timestamps (scaled by `speed`)."""

    kind: Literal["trace"] = Field(description="Load kind: the trace's timestamps.")
    max_in_flight: int | None = Field(
        default=None,
        gt=0,
        description="Cap on requests in flight (all workers); arrivals over it are dropped "
        "and counted. None: no cap.",
    )


ClosedOrOpenLoad = Annotated[ClosedLoad | OpenLoad, Field(discriminator="kind")]
AnyLoad = Annotated[ClosedLoad | OpenLoad | TraceLoad, Field(discriminator="kind")]


# --- SLOs and policy -------------------------------------------------------------------
class SloSpec(StrictModel):
    """Service-level objectives. The per-request thresholds decide goodput (a request
    counts as good only if it meets every one set); the p99 targets judge the run."""

    ttft_ms: float | None = Field(default=None, gt=0, description="Per-request max TTFT (ms).")
    tpot_ms: float | None = Field(default=None, gt=0, description="Per-request max TPOT (ms).")
    e2e_ms: float | None = Field(default=None, gt=0, description="Per-request max end-to-end (ms).")
    ttft_p99_ms: float | None = Field(default=None, gt=0, description="Run target: p99 TTFT (ms).")
    tpot_p99_ms: float | None = Field(default=None, gt=0, description="Run target: p99 TPOT (ms).")
    e2e_p99_ms: float | None = Field(default=None, gt=0, description="Run target: p99 e2e (ms).")

    def request_meets(
        self, *, ttft_ms: float | None, tpot_ms: float | None, e2e_ms: float | None
    ) -> bool:
        """True when one successful request meets every per-request threshold set. A
        missing measurement (e.g. no TPOT for a 1-token answer) does not fail it."""
        checks = ((self.ttft_ms, ttft_ms), (self.tpot_ms, tpot_ms), (self.e2e_ms, e2e_ms))
        return all(limit is None or value is None or value <= limit for limit, value in checks)


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


# --- the workload kinds --------------------------------------------------------------------
class _WorkloadBase(StrictModel):
    name: str = Field(
        pattern=_NAME_PATTERN,
        max_length=64,
        description="Unique name of the workload (letters, digits, _ . -); recorded per request.",
    )
    weight: int = Field(
        default=1, gt=0, description="Locust user weight when workloads run together."
    )
    api: ApiName | None = Field(
        default=None,
        description="Protocol override: openai-chat | openai-completions | anthropic "
        "(None: the run's default).",
    )
    model: str | None = Field(
        default=None,
        min_length=1,
        description="Model name to request (None: the server's first model).",
    )
    ignore_eos: bool = Field(
        default=True,
        description="Ask the server to ignore end-of-sequence so outputs reach max_tokens "
        "(vLLM/SGLang extension; ignored by servers that do not know it).",
    )
    temperature: float = Field(default=0.0, ge=0, le=2, description="Sampling temperature.")
    seed: int | None = Field(
        default=None, ge=0, description="Seed of this workload's randomness (None: the run's seed)."
    )
    prompt_format: Literal["text", "token_ids"] = Field(
        default="text",
        description="`text`: generated words sized by calibration; `token_ids`: random token "
        "ids sent on the completions API (exact size; needs api: openai-completions).",
    )
    token_id_vocab_size: int = Field(
        default=32000,
        gt=1000,
        description="Token ids are drawn below this (prompt_format token_ids).",
    )
    slo: SloSpec = Field(default_factory=SloSpec, description="SLO thresholds for goodput.")
    policy: Policy | None = Field(
        default=None,
        description="Client policy: timeouts, retries, continuation, fallback chain (None: one "
        "attempt per request, the run's timeouts).",
    )

    @field_validator("prompt_format")
    @classmethod
    def _token_ids_need_completions(cls, value: str, info: ValidationInfo) -> str:
        if value == "token_ids" and info.data.get("api") != "openai-completions":
            raise ValueError("token_ids needs api: openai-completions")
        return value


class ShortQueryFloodSpec(_WorkloadBase):
    """Many tiny prompts with short outputs: per-request overhead, scheduler, HTTP path."""

    kind: Literal["short_query_flood"] = Field(description="Workload kind.")
    input_tokens: Distribution = Field(
        default_factory=lambda: UniformDist(type="uniform", min=16, max=64),
        description="Prompt length in tokens (int or distribution).",
    )
    max_tokens: Distribution = Field(
        default_factory=lambda: FixedDist(type="fixed", value=16),
        description="Output tokens to request (int or distribution).",
    )
    load: ClosedOrOpenLoad = Field(
        default_factory=lambda: ClosedLoad(kind="closed", users=8),
        description="closed (users, think time) or open (rate, arrivals, cap, shape).",
    )


class LongContextSpec(_WorkloadBase):
    """Long documents with summary-length outputs: prefill cost and KV-cache pressure."""

    kind: Literal["long_context"] = Field(description="Workload kind.")
    document_tokens: Distribution = Field(
        default_factory=lambda: UniformDist(type="uniform", min=8192, max=32768),
        description="Prompt (document) length in tokens; 8k-128k is the intended range.",
    )
    summary_tokens: Distribution = Field(
        default_factory=lambda: FixedDist(type="fixed", value=128),
        description="Output (summary) tokens to request (int or distribution).",
    )
    load: ClosedOrOpenLoad = Field(
        default_factory=lambda: ClosedLoad(kind="closed", users=2),
        description="closed (users, think time) or open (rate, arrivals, cap, shape).",
    )

    @field_validator("document_tokens")
    @classmethod
    def _document_size(cls, dist: _DistBase) -> _DistBase:
        low, high = dist.bounds()
        if high is not None and high > _MAX_DOCUMENT_TOKENS:
            raise ValueError(f"at most {_MAX_DOCUMENT_TOKENS} tokens (got {high})")
        if low < 256:
            raise ValueError(f"a long-context document needs >= 256 tokens (got {low})")
        return dist


_MAX_DOCUMENT_TOKENS = 1_048_576


class LoraMixSpec(_WorkloadBase):
    """Requests spread over N adapters with Zipf popularity; set N above what the server
    keeps resident to measure adapter swapping."""

    kind: Literal["lora_mix"] = Field(description="Workload kind.")
    adapters: Annotated[AdapterSet, BeforeValidator(adapters_shorthand)] = Field(
        description="A list of adapter names (rank order), {count, prefix}, or from_target."
    )
    zipf_s: float = Field(
        default=1.0, ge=0, le=10, description="Zipf exponent: P(rank r) ∝ 1/r^s (0 = uniform)."
    )
    base_model_share: float = Field(
        default=0.0, ge=0, lt=1, description="Fraction of requests sent to the base model."
    )
    input_tokens: Distribution = Field(
        default_factory=lambda: UniformDist(type="uniform", min=64, max=256),
        description="Prompt length in tokens (int or distribution).",
    )
    max_tokens: Distribution = Field(
        default_factory=lambda: FixedDist(type="fixed", value=32),
        description="Output tokens to request (int or distribution).",
    )
    load: ClosedOrOpenLoad = Field(
        default_factory=lambda: ClosedLoad(kind="closed", users=4),
        description="closed (users, think time) or open (rate, arrivals, cap, shape).",
    )


class TokenScaling(StrictModel):
    """Shrink a trace's lengths so it fits a small server, keeping their relative sizes."""

    input_multiplier: float = Field(default=1.0, gt=0, description="Multiply input lengths.")
    output_multiplier: float = Field(default=1.0, gt=0, description="Multiply output lengths.")
    max_input_tokens: int | None = Field(default=None, gt=0, description="Cap on input length.")
    max_output_tokens: int | None = Field(default=None, gt=0, description="Cap on output length.")

    def scale_input(self, tokens: int) -> int:
        return _scale(tokens, self.input_multiplier, self.max_input_tokens)

    def scale_output(self, tokens: int) -> int:
        return _scale(tokens, self.output_multiplier, self.max_output_tokens)


def _scale(tokens: int, multiplier: float, cap: int | None) -> int:
    scaled = max(1, round(tokens * multiplier))
    return min(scaled, cap) if cap is not None else scaled


TraceFormat = Literal["azure_csv", "mooncake_jsonl", "sharegpt_json"]

_TRACE_SUFFIXES: Mapping[str, TraceFormat] = MappingProxyType(
    {".csv": "azure_csv", ".jsonl": "mooncake_jsonl", ".json": "sharegpt_json"}
)


class TraceReplaySpec(_WorkloadBase):
    """Replay a public trace: its arrival times (scaled by `speed`) and its lengths."""

    kind: Literal["trace_replay"] = Field(description="Workload kind.")
    trace: Path = Field(
        description="Trace file; `${VAR}` / `${VAR:-default}` expanded, relative paths "
        "resolved against the YAML file's folder."
    )
    format: TraceFormat | Literal["auto"] = Field(
        default="auto",
        validate_default=True,
        description="azure_csv | mooncake_jsonl | sharegpt_json, or auto (by extension: "
        ".csv, .jsonl, .json).",
    )
    speed: float = Field(
        default=1.0,
        gt=0,
        description="Time scale: 10 replays 10× faster (gaps / 10), same burst shape.",
    )
    start_offset_s: float = Field(
        default=0.0, ge=0, description="Where in the trace to start (s of trace time)."
    )
    duration_s: float | None = Field(
        default=None,
        gt=0,
        description="How long to replay (s of run time, i.e. after speed): the trace window "
        "is duration_s × speed long. None: to the end.",
    )
    max_requests: int | None = Field(
        default=None, gt=0, description="Stop after this many requests."
    )
    scale_tokens: TokenScaling | None = Field(
        default=None, description="Scale/cap the trace's token lengths (None: as recorded)."
    )
    use_prefix_blocks: bool = Field(
        default=False,
        description="Mooncake only: build prompts from its 512-token hash blocks so requests "
        "that share blocks share prompt prefixes (prefix-cache behaviour of the trace).",
    )
    max_tokens: Distribution | None = Field(
        default=None,
        description="Output tokens for traces without output lengths (ShareGPT without "
        "answers); None: 128.",
    )
    load: AnyLoad = Field(
        default_factory=lambda: TraceLoad(kind="trace"),
        validate_default=True,
        description="trace (the trace's timestamps), open (synthetic arrivals, trace "
        "lengths) or closed (users cycle through the trace's lengths).",
    )

    @field_validator("trace", mode="before")
    @classmethod
    def _resolve_trace(cls, value: Any, info: ValidationInfo) -> Any:
        if not isinstance(value, str | Path):
            return value
        expanded = _expand_env(str(value))
        path = Path(expanded).expanduser()
        context = info.context if isinstance(info.context, Mapping) else {}
        base_dir = context.get("base_dir")
        if not path.is_absolute() and base_dir is not None:
            path = Path(base_dir) / path
        path = path.resolve()
        if context.get("check_files", True) and not path.is_file():
            raise ValueError(f"trace file not found: {path}")
        return path

    @field_validator("format")
    @classmethod
    def _format_known(cls, value: str, info: ValidationInfo) -> str:
        trace = info.data.get("trace")
        if value == "auto" and trace is not None and trace.suffix.lower() not in _TRACE_SUFFIXES:
            raise ValueError(
                f"cannot tell the trace format from '{trace.suffix}': set format to "
                "azure_csv, mooncake_jsonl or sharegpt_json"
            )
        return value

    @field_validator("use_prefix_blocks")
    @classmethod
    def _blocks_need_hash_ids(cls, value: bool, info: ValidationInfo) -> bool:
        if value and _format_of(info.data) not in ("mooncake_jsonl", None):
            raise ValueError("needs a mooncake_jsonl trace (hash_ids)")
        if value and info.data.get("prompt_format") == "token_ids":
            raise ValueError("works with prompt_format text only")
        return value

    @field_validator("load")
    @classmethod
    def _timestamps_for_trace_load(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, TraceLoad) and _format_of(info.data) == "sharegpt_json":
            raise ValueError(
                "sharegpt_json has no timestamps: use {kind: open, rate_rps: ...} "
                "or {kind: closed, users: ...}"
            )
        return value

    @property
    def resolved_format(self) -> TraceFormat:
        """The format to read: explicit, or chosen by the file's extension."""
        found = _format_of({"trace": self.trace, "format": self.format})
        assert found is not None  # validated: auto only with a known suffix
        return found


def _format_of(data: Mapping[str, Any]) -> TraceFormat | None:
    """The trace format from already-validated fields (None when they failed)."""
    trace, fmt = data.get("trace"), data.get("format")
    if trace is None or fmt is None:
        return None
    if fmt != "auto":
        return fmt
    return _TRACE_SUFFIXES.get(trace.suffix.lower())


WorkloadSpec = Annotated[
    ShortQueryFloodSpec | LongContextSpec | LoraMixSpec | TraceReplaySpec,
    Field(discriminator="kind"),
]
"""One workload of any kind; `kind` picks the model."""

KIND_CLASS_NAMES: Mapping[str, str] = MappingProxyType(
    {
        "short_query_flood": "ShortQueryFlood",
        "long_context": "LongContextSummarisation",
        "lora_mix": "LoRAMix",
        "trace_replay": "TraceReplay",
    }
)
"""Workload kind -> the Locust user class name that runs it."""

_WORKLOAD_ADAPTER: TypeAdapter[Any] = TypeAdapter(WorkloadSpec)


class WorkloadFile(StrictModel):
    """What one YAML file declares: one or more workloads with unique names."""

    workloads: list[WorkloadSpec] = Field(min_length=1, description="The workloads, run by weight.")

    @field_validator("workloads")
    @classmethod
    def _unique_names(cls, workloads: list[Any]) -> list[Any]:
        seen: set[str] = set()
        names: list[str] = []
        for spec in workloads:
            if spec.name in seen:
                first = names.index(spec.name)
                raise ValueError(
                    f"duplicate workload name '{spec.name}' (workloads[{first}] and "
                    f"workloads[{len(names)}])"
                )
            seen.add(spec.name)
            names.append(spec.name)
        return workloads

    def by_name(self, name: str) -> Any:
        """The workload called `name`; KeyError lists the valid names."""
        for spec in self.workloads:
            if spec.name == name:
                return spec
        raise KeyError(f"no workload named '{name}' (have: {', '.join(self.names())})")

    def by_class_name(self, class_name: str) -> list[Any]:
        """The workloads a Locust user class (e.g. `LoRAMix`) runs, in file order."""
        return [s for s in self.workloads if KIND_CLASS_NAMES[s.kind] == class_name]

    def names(self) -> list[str]:
        return [spec.name for spec in self.workloads]


# ---------------------------------------------------------------------------------------
# helpers: env expansion and error messages
# ---------------------------------------------------------------------------------------
_ENV_PATTERN = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def _expand_env(text: str) -> str:
    """`${VAR}` and `${VAR:-default}` (shell semantics: empty counts as unset with :-);
    `${ZEROHOP_DATA}` is the package's own data folder unless the environment sets it."""

    def replace(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        value = os.environ.get(name) or builtin_path_variable(name)
        if value:
            return value
        if default is not None:
            return default
        raise ValueError(f"environment variable {name} is not set (or use ${{{name}:-default}})")

    return _ENV_PATTERN.sub(replace, text)


def _describe_first_error(exc: ValidationError, data: Any) -> str:
    """`field.path: message` for the first error, plus how many more there were."""
    errors = exc.errors(include_url=False)
    first = errors[0]
    loc = tuple(first["loc"])
    if first["type"] in ("union_tag_invalid", "union_tag_not_found"):
        loc = (*loc, str((first.get("ctx") or {}).get("discriminator", "kind")).strip("'"))
    path = _field_path(loc, data, missing_field=first["type"] == "missing")
    message = _friendly_message(first)
    more = f" (and {len(errors) - 1} more error{'s' if len(errors) > 2 else ''})"
    if not path:
        name = data.get("name") if isinstance(data, Mapping) else None
        path = f"workload '{name}'" if name else "<top>"
    return f"{path}: {message}{more if len(errors) > 1 else ''}"


def _field_path(loc: tuple[int | str, ...], data: Any, *, missing_field: bool) -> str:
    """Render a pydantic location against the raw data, dropping union tags (`open`,
    `short_query_flood`) that pydantic inserts but the user never wrote."""
    parts: list[str] = []
    node: Any = data
    for index, item in enumerate(loc):
        if isinstance(item, int) and isinstance(node, list) and 0 <= item < len(node):
            parts.append(f"[{item}]")
            node = node[item]
        elif isinstance(node, Mapping) and item in node:
            parts.append(f".{item}" if parts else str(item))
            node = node[item]
        elif (
            index == len(loc) - 1
            and isinstance(node, Mapping)
            and (missing_field or item not in _UNION_TAGS)
        ):
            parts.append(f".{item}" if parts else str(item))  # a missing field: name it
        # else: a tag or a union branch name that is not in the data: skip it
    return "".join(parts)


_UNION_TAGS = frozenset(
    {
        *KIND_CLASS_NAMES,
        *("closed", "open", "trace"),
        *("fixed", "uniform", "normal", "lognormal"),
        *("poisson", "gamma", "constant"),
        *("ramp", "step", "spike", "piecewise"),
    }
)
"""Branch names pydantic puts into error locations; they are not fields the user wrote."""

_COMPARISONS: Mapping[str, tuple[str, str]] = MappingProxyType(
    {
        "greater_than": ("gt", ">"),
        "greater_than_equal": ("ge", ">="),
        "less_than": ("lt", "<"),
        "less_than_equal": ("le", "<="),
    }
)


def _friendly_message(error: Any) -> str:
    kind = error["type"]
    ctx = error.get("ctx") or {}
    if kind in _COMPARISONS:
        key, sign = _COMPARISONS[kind]
        return f"must be {sign} {_number(ctx.get(key))} (got {error.get('input')!r})"
    if kind == "missing":
        return "required field is missing"
    if kind == "extra_forbidden":
        return "unknown field (not allowed here; check the spelling)"
    if kind == "union_tag_invalid":
        return f"unknown value {ctx.get('tag')!r} (expected one of: {ctx.get('expected_tags')})"
    if kind == "union_tag_not_found":
        return "required field is missing (it selects the model for this section)"
    if kind == "value_error":
        return str(error["msg"]).removeprefix("Value error, ")
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected')} (got {error.get('input')!r})"
    return str(error["msg"])


def _number(value: Any) -> Any:
    """0.0 -> 0 in messages, so limits read as the user wrote them."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value
