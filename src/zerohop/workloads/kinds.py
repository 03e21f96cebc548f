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

from pydantic import (
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from zerohop.core.apis import ApiName
from zerohop.core.slo import SloError, parse_slo_mapping, request_meets
from zerohop.workloads.adapters import AdapterSet, adapters_shorthand
from zerohop.workloads.data_paths import resolve_input_path
from zerohop.workloads.distributions import (
    Distribution,
    DistributionBase,
    FixedDist,
    UniformDist,
)
from zerohop.workloads.load_spec import AnyLoad, ClosedLoad, ClosedOrOpenLoad, TraceLoad
from zerohop.workloads.model_base import StrictModel
from zerohop.workloads.policy_spec import Policy
from zerohop.workloads.session_specs import ConversationSource, PrefixPool, SyntheticConversations

__all__ = [
    "KIND_CLASS_NAMES",
    "ApiName",
    "ConversationSpec",
    "LongContextSpec",
    "LoraMixSpec",
    "SharedPrefixSpec",
    "ShortQueryFloodSpec",
    "SloSpec",
    "TokenScaling",
    "TraceFormat",
    "TraceReplaySpec",
    "WorkloadSpec",
]


_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"


class SloSpec(StrictModel):
    """Service-level objectives in the one SLO grammar (`core.slo`, docs/slo.md), e.g.
    `{ttft_p99_ms: 500, e2e_ms: 2000}`. Each objective judges the workload's requests on
    its statistic and sets the per-request threshold its goodput counts against; the
    run's `--slo`, when given, replaces every workload's own."""

    model_config = ConfigDict(extra="allow", frozen=True)  # the keys are the grammar's
    __pydantic_extra__: dict[str, Annotated[float, Field(gt=0, allow_inf_nan=False)]]

    @model_validator(mode="after")
    def _in_the_grammar(self) -> SloSpec:
        try:
            parse_slo_mapping(self.objectives, where="slo")
        except SloError as exc:  # the error's path already says `slo`
            raise ValueError(str(exc).removeprefix("slo: ")) from None
        return self

    @property
    def objectives(self) -> dict[str, float]:
        """The objectives as the manifest and `--slo` write them (key → ms)."""
        return {str(k): float(v) for k, v in (self.model_extra or {}).items()}

    def request_meets(self, **values: float | None) -> bool:
        """True when one successful request meets every per-request threshold (`ttft_ms=`,
        `tpot_ms=`, ...). A missing measurement (no TPOT for a 1-token answer) passes."""
        return request_meets(parse_slo_mapping(self.objectives, where="slo"), values)


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
    slo: SloSpec = Field(
        default_factory=lambda: SloSpec.model_validate({}),
        description="Objectives in the SLO grammar (docs/slo.md), e.g. {ttft_p99_ms: 500}: "
        "they decide this workload's goodput and verdict; a run's --slo replaces them.",
    )
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
        return resolve_input_path(value, info.context, what="trace")

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


class ConversationSpec(_WorkloadBase):
    """Multi-turn sessions: every turn sends the whole history, the model's own earlier
    answers included, plus a new user message, after a think time. A failed turn ends
    its session. Closed loop: each user runs one session after another; open loop:
    `rate_rps` is session arrivals per second and `max_in_flight` caps live sessions."""

    kind: Literal["conversation"] = Field(description="Workload kind.")
    source: ConversationSource = Field(
        default_factory=lambda: SyntheticConversations(type="synthetic"),
        description="synthetic (distributions), sharegpt (a multi-turn ShareGPT file) or "
        "mooncake (sessions rebuilt from the Mooncake conversation trace).",
    )
    max_turns: int | None = Field(
        default=None, gt=0, description="End every session after this many turns."
    )
    think_time_s: float = Field(
        default=1.0, ge=0, description="Pause between a turn's answer and the next turn (s)."
    )
    think_time: Literal["constant", "exponential"] = Field(
        default="exponential",
        description="`constant`: exactly think_time_s; `exponential`: random with that mean.",
    )
    scale_tokens: TokenScaling | None = Field(
        default=None, description="Scale/cap the user message and answer lengths."
    )
    load: ClosedOrOpenLoad = Field(
        default_factory=lambda: ClosedLoad(kind="closed", users=4),
        description="closed (users = concurrent sessions; think_time_s between sessions) "
        "or open (rate_rps = sessions per second).",
    )

    @field_validator("prompt_format")
    @classmethod
    def _text_only(cls, value: str) -> str:
        return _text_prompts(value)


class SharedPrefixSpec(_WorkloadBase):
    """Each request is one system prompt from a pool (chosen by popularity) and a unique
    user question: the prefix cache's hit rate, and what it buys. `prefix_mode: unique`
    puts a random salt at the start of every prompt: the same sizes, zero reuse."""

    kind: Literal["shared_prefix"] = Field(description="Workload kind.")
    prefixes: PrefixPool = Field(
        default_factory=PrefixPool, description="The pool of system prompts."
    )
    question_tokens: Distribution = Field(
        default_factory=lambda: UniformDist(type="uniform", min=16, max=64),
        description="Length of the unique user question in tokens.",
    )
    max_tokens: Distribution = Field(
        default_factory=lambda: FixedDist(type="fixed", value=32),
        description="Output tokens to request (int or distribution).",
    )
    prefix_mode: Literal["shared", "unique"] = Field(
        default="shared",
        description="`shared`: the pool's prompts as they are; `unique`: a random salt "
        "starts every prompt (deliberately cache-cold: the zero-reuse control).",
    )
    load: ClosedOrOpenLoad = Field(
        default_factory=lambda: ClosedLoad(kind="closed", users=4),
        description="closed (users, think time) or open (rate, arrivals, cap, shape).",
    )

    @field_validator("prompt_format")
    @classmethod
    def _text_only(cls, value: str) -> str:
        return _text_prompts(value)


def _text_prompts(value: str) -> str:
    if value != "text":
        raise ValueError("this kind builds its prompts from text: use prompt_format: text")
    return value


WorkloadSpec = Annotated[
    ShortQueryFloodSpec | LongContextSpec | LoraMixSpec | TraceReplaySpec | ConversationSpec
    | SharedPrefixSpec,
    Field(discriminator="kind"),
]
"""One workload of any kind; `kind` picks the model."""

KIND_CLASS_NAMES: Mapping[str, str] = MappingProxyType(
    {
        "short_query_flood": "ShortQueryFlood",
        "long_context": "LongContextSummarisation",
        "lora_mix": "LoRAMix",
        "trace_replay": "TraceReplay",
        "conversation": "Conversation",
        "shared_prefix": "SharedPrefix",
    }
)
"""Workload kind -> the Locust user class name that runs it."""
