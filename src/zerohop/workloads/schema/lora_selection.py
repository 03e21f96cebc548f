"""Which LoRA adapters a `lora_mix` workload asks for: named, counted, or the target's.

`from_target` exists because adapter names are the server's, not ours: a mix that names
`lora-0..7` against a vLLM serving `a0..a3` gets 404s for most of its requests. Taking
them from the target's `/v1/models` (the entries whose `parent` is the base model, as
vLLM lists them) lets one shipped workload fit any server that has adapters; the run
resolves them before any load is sent (`loadgen.selection`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

FROM_TARGET = "from_target"


class AdapterSet(BaseModel):
    """Adapters by name, `count` names made from `prefix` (prefix0 .. prefixN-1), or
    `from_target: true` (the target's own adapters, from its /v1/models)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    names: list[str] | None = Field(default=None, min_length=1, description="Adapter names.")
    count: int | None = Field(default=None, gt=0, le=100_000, description="Number of adapters.")
    prefix: str = Field(default="lora-", min_length=1, description="Name prefix with `count`.")
    from_target: bool = Field(
        default=False,
        description="Use the adapters the target lists in /v1/models (entries whose "
        "`parent` is the base model), in the order listed; `adapters: from_target` for short.",
    )
    max_count: int | None = Field(
        default=None, gt=0, description="With from_target: use at most this many of them."
    )

    @model_validator(mode="after")
    def _one_way(self) -> AdapterSet:
        ways = (self.names is not None) + (self.count is not None) + self.from_target
        if ways != 1:
            raise ValueError("give one of: a list of adapter names, `count` (+ `prefix`), "
                             "or `from_target`")
        if self.names is not None and len(set(self.names)) != len(self.names):
            raise ValueError("adapter names must be unique")
        if self.max_count is not None and not self.from_target:
            raise ValueError("`max_count` goes with `from_target`")
        return self

    def resolved_names(self) -> list[str]:
        """Adapter names in popularity-rank order (the first is the most requested).
        A `from_target` set has none until the run resolves it against the target."""
        if self.from_target:
            raise ValueError("adapters come from the target: resolve them first "
                             "(loadgen.selection.resolve_target_adapters)")
        if self.names is not None:
            return list(self.names)
        return [f"{self.prefix}{i}" for i in range(self.count or 0)]


def adapters_shorthand(value: Any) -> Any:
    """`adapters: [a, b]` → names; `adapters: from_target` → the target's."""
    if isinstance(value, list):
        return {"names": value}
    if value == FROM_TARGET:
        return {"from_target": True}
    return value
