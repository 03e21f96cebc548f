"""The workload kinds: what each kind of workload sends, on top of the fields all share.

`WorkloadSpec` is the union of the kinds, discriminated on `kind`; `KIND_CLASS_NAMES`
names the Locust user class (in `loadtests/`) that runs each kind. Trace paths are
resolved while validating (`${VAR:-default}` expansion, relative to the YAML's folder,
passed as the validation context's `base_dir`), so a validated spec is final.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, ValidationInfo, field_validator

from zerohop.core.apis import ApiName
from zerohop.workloads.adapters import AdapterSet, adapters_shorthand
from zerohop.workloads.data_paths import expand_path_variables
from zerohop.workloads.distributions import (
    Distribution,
    DistributionBase,
    FixedDist,
    UniformDist,
)
from zerohop.workloads.load_spec import AnyLoad, ClosedLoad, ClosedOrOpenLoad, TraceLoad
from zerohop.workloads.model_base import StrictModel
from zerohop.workloads.policy_spec import Policy

__all__ = [
    "KIND_CLASS_NAMES",
    "ApiName",
    "LongContextSpec",
    "LoraMixSpec",
    "ShortQueryFloodSpec",
    "SloSpec",
    "TokenScaling",
    "TraceFormat",
    "TraceReplaySpec",
    "WorkloadSpec",
]


_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"


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


class _WorkloadBase(StrictModel):
    name: str = Field(
        pattern=_NAME_PATTERN,
        max_length=64,
        description="Unique name of the workload (letters, digits, _ . -); recorded per request.",
    )
    weight: int | None = Field(
        default=None,
        gt=0,
        description="Locust user weight of this workload when workloads run together "
        "(None: the weight of its kind's user class in loadtests/).",
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
    def _document_size(cls, dist: DistributionBase) -> DistributionBase:
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
        expanded = expand_path_variables(str(value))
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
