"""The APIs zerohop speaks: their names, and the form a prompt takes on each.

This is the one list of API names. CLI choices, config types, the adapter registry and
the request planner all read it, so adding an API is one entry here (plus its adapter),
and a unit test fails if a second literal list of the names appears in the package.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal, cast, get_args

__all__ = ["APIS", "API_NAMES", "DEFAULT_API", "ApiName", "ApiSpec", "api_spec",
           "structured_apis"]

ApiName = Literal["openai-chat", "openai-completions", "anthropic", "openai-responses"]
API_NAMES: tuple[ApiName, ...] = cast("tuple[ApiName, ...]", get_args(ApiName))
DEFAULT_API: ApiName = "openai-chat"


@dataclass(frozen=True, slots=True)
class ApiSpec:
    """How a workload's one prompt (text, or token ids) travels on an API.

    `chat_messages`: the prompt is sent as chat messages, so the server applies a chat
    template (and counts its overhead); otherwise it is sent as raw `prompt` text.
    `takes_token_ids`: a prompt may be a list of token ids instead of text.
    `tools`: a request may offer tools, and the history may carry the model's tool calls
    and their results (what an agent loop needs).
    `structured_output`: a request may ask for an answer that follows a JSON schema
    (chat's `response_format`, Responses' `text.format`).
    `key_env`: the vendor's usual API-key variable (ZEROHOP_API_KEY overrides it).
    """

    name: ApiName
    chat_messages: bool
    takes_token_ids: bool
    tools: bool
    structured_output: bool
    key_env: str


APIS: Mapping[ApiName, ApiSpec] = MappingProxyType({
    spec.name: spec
    for spec in (
        ApiSpec("openai-chat", chat_messages=True, takes_token_ids=False, tools=True,
                structured_output=True, key_env="OPENAI_API_KEY"),
        ApiSpec("openai-completions", chat_messages=False, takes_token_ids=True, tools=False,
                structured_output=False, key_env="OPENAI_API_KEY"),
        ApiSpec("anthropic", chat_messages=True, takes_token_ids=False, tools=True,
                structured_output=False, key_env="ANTHROPIC_API_KEY"),
        ApiSpec("openai-responses", chat_messages=True, takes_token_ids=False, tools=True,
                structured_output=True, key_env="OPENAI_API_KEY"),
    )
})


def api_spec(name: str) -> ApiSpec:
    """The spec of API `name`; an unknown name is a ValueError that lists the valid ones."""
    spec = APIS.get(cast("ApiName", name))
    if spec is None:
        raise ValueError(f"api: unknown API {name!r}; valid: {', '.join(API_NAMES)}")
    return spec


def structured_apis() -> str:
    """The APIs that take a JSON schema for the answer, for an error message."""
    return " or ".join(spec.name for spec in APIS.values() if spec.structured_output)
