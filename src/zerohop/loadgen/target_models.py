"""What the target serves, from its `/v1/models`: base models and their LoRA adapters.

vLLM lists a served LoRA adapter as its own model entry whose `parent` is the base
model (the embedded target does the same); OpenAI, SGLang and gateways list models with
no `parent`. Read once at the start of a run, so that a workload asking for a model or an
adapter the target does not have is refused before any load is sent, and a mix that
takes its adapters from the target gets them.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from zerohop.client.anthropic_adapter import ANTHROPIC_VERSION
from zerohop.core.apis import DEFAULT_API

LIST_LIMIT = 8  # names shown in a one-line message before "and N more"


@dataclass(frozen=True)
class TargetModels:
    """The models a target lists, in its order: bases (no parent) and, per base, the
    adapters whose parent it is."""

    bases: tuple[str, ...]
    adapters: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def ids(self) -> set[str]:
        return set(self.bases) | {a for names in self.adapters.values() for a in names}

    def default_base(self) -> str | None:
        return self.bases[0] if self.bases else None

    def adapters_of(self, base: str) -> tuple[str, ...]:
        return self.adapters.get(base, ())

    def describe(self) -> str:
        """`llama-3.1-8b (adapters: a0, a1)` — what the target has, for one-line errors."""
        if not self.bases:
            return "no models"
        parts = []
        for base in self.bases:
            adapters = self.adapters_of(base)
            parts.append(f"{base} (adapters: {short_list(adapters)})" if adapters
                         else f"{base} (no adapters)")
        return "; ".join(parts)


def short_list(names: tuple[str, ...] | list[str]) -> str:
    shown = ", ".join(names[:LIST_LIMIT])
    more = len(names) - LIST_LIMIT
    return shown + (f" and {more} more" if more > 0 else "")


def parse_models(body: Any) -> TargetModels:
    """An OpenAI-style `{"data": [{"id", "parent"?}, ...]}` body → TargetModels.
    An entry whose parent is not itself listed is taken as a base model's adapter all
    the same (the parent is what it is served on)."""
    entries = body.get("data") if isinstance(body, dict) else None
    if not isinstance(entries, list):
        raise ValueError("/v1/models: no `data` list")
    bases: list[str] = []
    adapters: dict[str, list[str]] = {}
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
            continue
        parent = entry.get("parent")
        if isinstance(parent, str) and parent and parent != entry["id"]:
            adapters.setdefault(parent, []).append(entry["id"])
        elif entry["id"] not in bases:
            bases.append(entry["id"])
    for parent in adapters:
        if parent not in bases:
            bases.append(parent)
    return TargetModels(tuple(bases), {k: tuple(v) for k, v in adapters.items()})




def fetch_target_models(host: str, *, timeout_s: float = 10.0, api: str = DEFAULT_API,
                        api_key: str | None = None) -> TargetModels | None:
    """The target's models, or None when it has no usable `/v1/models` (some servers
    and gateways do not list models: then nothing can be checked, only tried)."""
    request = urllib.request.Request(host.rstrip("/") + "/v1/models")
    if api == "anthropic":
        request.add_header("anthropic-version", ANTHROPIC_VERSION)
        if api_key:
            request.add_header("x-api-key", api_key)
    elif api_key:
        request.add_header("Authorization", f"Bearer {api_key}")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as resp:
            body = json.loads(resp.read())
        return parse_models(body)
    except (urllib.error.URLError, OSError, ValueError):
        return None
