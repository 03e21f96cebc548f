"""The APIs zerohop speaks: one registry entry per API.

An entry names everything an API is: its spec (the form a prompt takes on it), its client
adapter, the stream shape the embedded sim sends for it and the URL path it serves it
on, and its golden stream (a recorded example the tests decode). The adapter and the
shape live in the layers above this one (client, sim), so the entry names them as import
paths, resolved where they are used: importing this module loads neither.

This is the one list of API names. CLI choices, config types, `create_api_adapter`, the
sim's routes and the golden-stream tests all read it, and a unit test fails if a second
literal list of the names appears in the package. `register_api` adds an API at runtime,
from a plugin (`core/plugins.py`) that every process of a run loads.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal, cast, get_args

__all__ = ["APIS", "API_ENTRIES", "API_NAMES", "DEFAULT_API", "ApiEntry", "ApiName",
           "ApiSpec", "api_entry", "api_names", "api_spec", "register_api",
           "resolve_import_path", "structured_apis"]

# the built-in APIs, for typing; `api_names()` also holds the ones registered at runtime
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
    `key_env`: the vendor's usual API-key variable (ZEROHOP_API_KEY overrides it); its
    value is masked in everything zerohop writes (`core.redaction.secret_env_names`).
    `images`: a message may carry images (base64 image parts before its text).
    `ignore_eos`: the request can ask the server to ignore end-of-sequence (vLLM's and
    SGLang's extension), so an answer runs to its `max_tokens`.
    """

    name: str
    chat_messages: bool
    takes_token_ids: bool
    tools: bool
    structured_output: bool
    key_env: str
    images: bool = False
    ignore_eos: bool = False


@dataclass(frozen=True, slots=True)
class ApiEntry:
    """One API, whole. `adapter` and `embedded_shape` are `module:attribute` import paths.

    `adapter`: the client adapter class (`zerohop.client.protocols.ApiAdapter`).
    `embedded_path`: the URL path the embedded sim serves the API on.
    `embedded_form`: the request body the sim reads there, the name of a registered
    `zerohop.sim.answers.body_forms.BodyForm` (chat, completions, messages and responses ship; the
    shape's module may register one more); it also picks the shape of the sim's error
    bodies.
    `embedded_shape`: the function that builds one request's stream shape (the signature
    of `zerohop.sim.answers.answer_shapes.chat_shape`).
    `golden_stream`: its recorded example stream, `NAME.sse` beside `NAME.json` (what it
    decodes to) in the tests' stream fixtures; an absolute path names one elsewhere.
    """

    spec: ApiSpec
    adapter: str
    embedded_path: str
    embedded_form: str
    embedded_shape: str
    golden_stream: str

    @property
    def name(self) -> str:
        return self.spec.name


def _builtin(spec: ApiSpec, adapter: str, path: str, form: str, shape: str,
             golden: str) -> ApiEntry:
    return ApiEntry(spec, f"zerohop.client.{adapter}", path, form,
                    f"zerohop.sim.answers.answer_shapes:{shape}", golden)


_ENTRIES: dict[str, ApiEntry] = {}
_SPECS: dict[str, ApiSpec] = {}
API_ENTRIES: Mapping[str, ApiEntry] = MappingProxyType(_ENTRIES)
APIS: Mapping[str, ApiSpec] = MappingProxyType(_SPECS)


def register_api(entry: ApiEntry) -> None:
    """Add an API; its name and its sim path must be new (a ValueError says which not)."""
    if entry.name in _ENTRIES:
        raise ValueError(f"api: {entry.name!r} is already registered")
    taken = {e.embedded_path: e.name for e in _ENTRIES.values()}
    if entry.embedded_path in taken:
        raise ValueError(f"api: {entry.name!r}: the sim already serves "
                         f"{taken[entry.embedded_path]!r} on {entry.embedded_path}")
    _ENTRIES[entry.name] = entry
    _SPECS[entry.name] = entry.spec


for _entry in (
    _builtin(ApiSpec("openai-chat", chat_messages=True, takes_token_ids=False, tools=True,
                     structured_output=True, key_env="OPENAI_API_KEY", images=True,
                     ignore_eos=True),
             "openai_adapters:OpenAIChatAdapter", "/v1/chat/completions", "chat",
             "chat_shape", "vllm_chat_usage"),
    _builtin(ApiSpec("openai-completions", chat_messages=False, takes_token_ids=True,
                     tools=False, structured_output=False, key_env="OPENAI_API_KEY",
                     ignore_eos=True),
             "openai_adapters:OpenAICompletionsAdapter", "/v1/completions", "completions",
             "completions_shape", "vllm_completions_usage"),
    _builtin(ApiSpec("anthropic", chat_messages=True, takes_token_ids=False, tools=True,
                     structured_output=False, key_env="ANTHROPIC_API_KEY", images=True),
             "anthropic_adapter:AnthropicMessagesAdapter", "/v1/messages", "messages",
             "messages_shape", "anthropic_full"),
    _builtin(ApiSpec("openai-responses", chat_messages=True, takes_token_ids=False,
                     tools=True, structured_output=True, key_env="OPENAI_API_KEY",
                     images=True, ignore_eos=True),
             "responses_adapter:OpenAIResponsesAdapter", "/v1/responses", "responses",
             "responses_shape", "openai_responses_reasoning"),
):
    register_api(_entry)


def api_names() -> tuple[str, ...]:
    """Every registered API's name, the built-in ones first (for CLI choices)."""
    return tuple(_ENTRIES)


def api_entry(name: str) -> ApiEntry:
    """The entry of API `name`; an unknown name is a ValueError that lists the valid ones."""
    entry = _ENTRIES.get(name)
    if entry is None:
        raise ValueError(f"api: unknown API {name!r}; valid: {', '.join(_ENTRIES)}")
    return entry


def api_spec(name: str) -> ApiSpec:
    """The spec of API `name`; an unknown name is a ValueError that lists the valid ones."""
    return api_entry(name).spec


def resolve_import_path(path: str) -> Any:
    """The object a `module:attribute` path names (an entry's adapter or shape)."""
    module, _, attribute = path.partition(":")
    if not attribute:
        raise ValueError(f"api: {path!r} is not a module:attribute import path")
    return getattr(importlib.import_module(module), attribute)


def structured_apis() -> str:
    """The APIs that take a JSON schema for the answer, for an error message."""
    return " or ".join(spec.name for spec in APIS.values() if spec.structured_output)
