"""The workload kinds: what each kind of workload sends, on top of the fields all share.

The fields all share are `workload_base.WorkloadBase`; the agent kind is
`agent_spec.AgentSpec`; `kind_registry` registers each kind with the rest of what makes
it (its user class, default file, planner), and builds their union.
Trace paths are resolved while validating (`${VAR:-default}` expansion, relative to the
YAML's folder, passed as the validation context's `base_dir`), so a validated spec is
final.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, ValidationInfo, field_validator

from zerohop.core.apis import ApiName
from zerohop.workloads.schema.agent_spec import AgentSpec
from zerohop.workloads.schema.data_paths import resolve_input_path
from zerohop.workloads.schema.distributions import (
    Distribution,
    DistributionBase,
    fixed_by_default,
    uniform_by_default,
)
from zerohop.workloads.schema.load_spec import (
    AnyLoad,
    ClosedOrOpenLoad,
    ThinkTime,
    TraceLoad,
    closed_by_default,
)
from zerohop.workloads.schema.lora_selection import AdapterSet, adapters_shorthand
from zerohop.workloads.schema.model_base import StrictModel
from zerohop.workloads.schema.session_specs import (
    ConversationSource,
    PrefixPool,
    SyntheticConversations,
)
from zerohop.workloads.schema.workload_base import SloSpec, TextPromptWorkload, WorkloadBase

__all__ = [
    "AgentSpec",
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
]


# what a field means where several kinds have it
_PROMPT_TOKENS = "Prompt length in tokens (int or distribution)."
_OUTPUT_TOKENS = "Output tokens to request (int or distribution)."
_CLOSED_OR_OPEN = "closed (users, think time) or open (rate, arrivals, cap, shape)."


class ShortQueryFloodSpec(WorkloadBase):
    """Many tiny prompts with short outputs: per-request overhead, scheduler, HTTP path."""

    kind: Literal["short_query_flood"] = Field(description="Workload kind.")
    input_tokens: Distribution = uniform_by_default(16, 64, _PROMPT_TOKENS)
    max_tokens: Distribution = fixed_by_default(16, _OUTPUT_TOKENS)
    load: ClosedOrOpenLoad = closed_by_default(8, _CLOSED_OR_OPEN)


class LongContextSpec(WorkloadBase):
    """Long documents with summary-length outputs: prefill cost and KV-cache pressure."""

    kind: Literal["long_context"] = Field(description="Workload kind.")
    document_tokens: Distribution = uniform_by_default(
        8192, 32768, "Prompt (document) length in tokens; 8k-128k is the intended range."
    )
    summary_tokens: Distribution = fixed_by_default(
        128, "Output (summary) tokens to request (int or distribution)."
    )
    load: ClosedOrOpenLoad = closed_by_default(2, _CLOSED_OR_OPEN)

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


class LoraMixSpec(WorkloadBase):
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
    input_tokens: Distribution = uniform_by_default(64, 256, _PROMPT_TOKENS)
    max_tokens: Distribution = fixed_by_default(32, _OUTPUT_TOKENS)
    load: ClosedOrOpenLoad = closed_by_default(4, _CLOSED_OR_OPEN)


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


class TraceReplaySpec(WorkloadBase):
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


class ConversationSpec(TextPromptWorkload):
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
    think_time: ThinkTime = "exponential"
    scale_tokens: TokenScaling | None = Field(
        default=None, description="Scale/cap the user message and answer lengths."
    )
    load: ClosedOrOpenLoad = closed_by_default(
        4,
        "closed (users = concurrent sessions; think_time_s between sessions) "
        "or open (rate_rps = sessions per second).",
    )


class SharedPrefixSpec(TextPromptWorkload):
    """Each request is one system prompt from a pool (chosen by popularity) and a unique
    user question: the prefix cache's hit rate, and what it buys. `prefix_mode: unique`
    puts a random salt at the start of every prompt: the same sizes, zero reuse."""

    kind: Literal["shared_prefix"] = Field(description="Workload kind.")
    prefixes: PrefixPool = Field(
        default_factory=PrefixPool, description="The pool of system prompts."
    )
    question_tokens: Distribution = uniform_by_default(
        16, 64, "Length of the unique user question in tokens."
    )
    max_tokens: Distribution = fixed_by_default(32, _OUTPUT_TOKENS)
    prefix_mode: Literal["shared", "unique"] = Field(
        default="shared",
        description="`shared`: the pool's prompts as they are; `unique`: a random salt "
        "starts every prompt (deliberately cache-cold: the zero-reuse control).",
    )
    load: ClosedOrOpenLoad = closed_by_default(4, _CLOSED_OR_OPEN)
