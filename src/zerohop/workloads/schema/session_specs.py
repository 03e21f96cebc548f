"""The sections of the `conversation` and `shared_prefix` workload kinds: where a
conversation's turns come from, and the pool of system prompts requests share.

Declarations only: `conversation_sources` reads the files named here, `conversation`
and `shared_prefix` plan the requests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationInfo, field_validator

from zerohop.workloads.schema.data_paths import resolve_input_path
from zerohop.workloads.schema.distributions import (
    Distribution,
    fixed_by_default,
    uniform_by_default,
)
from zerohop.workloads.schema.model_base import StrictModel, tag_shorthand

__all__ = [
    "ConversationSource",
    "MooncakeConversations",
    "PrefixPool",
    "ShareGptConversations",
    "SyntheticConversations",
]

MAX_POOL_SIZE = 10_000
MIN_PREFIX_TOKENS = 16  # room for the unique mode's salt


class SyntheticConversations(StrictModel):
    """Conversations drawn from distributions: how many turns, how long each new user
    message is, and how many tokens each answer may have."""

    type: Literal["synthetic"] = Field(description="Source kind: drawn from distributions.")
    turns: Distribution = uniform_by_default(2, 6, "Turns per session (int or distribution).")
    user_tokens: Distribution = uniform_by_default(
        32, 128, "Length of each new user message in tokens (the history comes on top)."
    )
    answer_tokens: Distribution = fixed_by_default(
        64, "max_tokens of each turn (with ignore_eos: the answer's length)."
    )


class _FileSource(StrictModel):
    path: Path = Field(
        description="The file; `${VAR}` / `${VAR:-default}` expanded, relative paths "
        "resolved against the YAML file's folder."
    )
    max_conversations: int | None = Field(
        default=None, gt=0, description="Use only the first N conversations (None: all)."
    )

    @field_validator("path", mode="before")
    @classmethod
    def _resolve_path(cls, value: Any, info: ValidationInfo) -> Any:
        return resolve_input_path(value, info.context, what="conversation")


class ShareGptConversations(_FileSource):
    """ShareGPT-style multi-turn conversations (`[{"conversations": [{"from", "value"},
    ...]}, ...]`): each human message is a turn, sized by its length under the embedded
    target's rule (`\\w+|[^\\w\\s]`); the reply after it gives the turn's max_tokens."""

    type: Literal["sharegpt"] = Field(description="Source kind: a ShareGPT JSON file.")
    answer_tokens: Distribution = fixed_by_default(
        128, "max_tokens of a turn the file has no reply for."
    )


class MooncakeConversations(_FileSource):
    """Sessions rebuilt from the Mooncake conversation trace (`conversation_trace.jsonl`):
    a request whose 512-token prefix blocks extend an earlier request's continues that
    session; its new user message is what its input adds to the earlier input and answer."""

    type: Literal["mooncake"] = Field(description="Source kind: a Mooncake JSONL trace.")
    trace_think_times: bool = Field(
        default=False,
        description="Think before each later turn for the trace's gap between the two "
        "turns' arrivals, divided by `speed` (False: the workload's think_time_s).",
    )
    speed: float = Field(
        default=1.0, gt=0, description="With trace_think_times: 10 thinks 10× shorter."
    )


ConversationSource = Annotated[
    SyntheticConversations | ShareGptConversations | MooncakeConversations,
    Field(discriminator="type"),
    tag_shorthand("type"),
]
"""Where a conversation workload's sessions come from; `source: synthetic` is the
defaults of the synthetic source."""


class PrefixPool(StrictModel):
    """The system prompts a shared-prefix workload chooses from: how many, how long,
    how popular each is."""

    count: int = Field(
        default=8, gt=0, le=MAX_POOL_SIZE, description="System prompts in the pool."
    )
    tokens: Distribution = fixed_by_default(
        512, "Length of each system prompt in tokens (drawn once per prompt)."
    )
    popularity: Literal["uniform", "zipf"] = Field(
        default="zipf",
        description="How requests pick a prompt: uniform, or zipf (rank r ∝ 1/r^zipf_s).",
    )
    zipf_s: float = Field(
        default=1.0, ge=0, le=10, description="Zipf exponent (popularity zipf)."
    )

    @field_validator("tokens")
    @classmethod
    def _long_enough(cls, dist: Any) -> Any:
        low, _high = dist.bounds()
        if low < MIN_PREFIX_TOKENS:
            raise ValueError(f"a system prompt needs >= {MIN_PREFIX_TOKENS} tokens (got {low})")
        return dist
