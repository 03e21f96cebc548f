"""The request bodies the embedded target reads: one registry entry per body form.

An API's entry (`core/apis.ApiEntry.embedded_form`) names the form the sim reads on its
path. The form says everything the sim reads differently from one body to another: how
the prompt is counted and turned into the ids the prefix cache keys on, where the output
budget is and what it is when absent, whether the usage always ends the stream, the
style of its error bodies and its status for a full queue, whether its answer may plan
reasoning, tool calls and a JSON schema (and where the body offers them), and whether a
seeded temperature-0 request gets a greedy answer. Every module of the sim reads these
entries instead of comparing the form's name, so a plugin adds a form with
`register_body_form` and edits nothing under sim/.

The four shipped forms (chat, completions, messages, responses) are defined in
`sim/answers/builtin_forms.py`, whose readers use the modules that look forms up here; they are
registered on the first lookup, so this module imports none of them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["AnswerReading", "BodyForm", "GreedyReading", "body_form", "body_form_names",
           "register_body_form"]

Body = dict[str, Any]
_BUILTIN_MODULE = "zerohop.sim.answers.builtin_forms"


@dataclass(frozen=True, slots=True)
class AnswerReading:
    """Where a body offers tools and asks for a JSON schema (a form with this may plan
    reasoning, a tool call or a schema-shaped answer).

    `tool_function_key`: the key of a tool's definition inside each `tools` entry (chat:
    "function"); None: the entry is the definition. `tool_schema_key`: the key of its
    arguments' JSON schema. `named_tool_choice`: a `tool_choice` object read as
    ("none" | "required", the tool it names), None where it says nothing this form knows
    (then: auto). `schema_spec`: the object holding the answer's `schema`, None when the
    body asks for none (a form without structured output leaves it None)."""

    tool_function_key: str | None
    tool_schema_key: str
    named_tool_choice: Callable[[Body], tuple[str, str | None] | None]
    schema_spec: Callable[[Body], Any] | None = None


@dataclass(frozen=True, slots=True)
class GreedyReading:
    """A form whose seeded temperature-0 request gets the greedy answer: `prompt_key`
    holds what seeds it, `wants_logprobs` reads whether the body asks for logprobs, and
    `logprobs_shape` is the shape they are answered in ("chat" or "completions")."""

    prompt_key: str
    wants_logprobs: Callable[[Any], bool]
    logprobs_shape: Literal["chat", "completions"]


@dataclass(frozen=True, slots=True)
class BodyForm:
    """One request body the sim reads.

    `prompt_tokens`: the prompt's token count as usage reports it (a ValueError is the
    client's 400, its message the reason). `prompt_ids`: the ids the prefix cache keys on,
    as many as `prompt_tokens` counts. `max_tokens_keys`: the output budget's keys, the
    first present wins; `max_tokens_required`: the 400's message when none is (None: not
    required); `default_max_tokens`: the budget when none is given (None: what the model's
    context leaves). `usage_always`: the stream ends with its usage whatever
    `stream_options` says. `error_style`: the shape of its error bodies;
    `overload_status`: its status when the waiting queue is full. `reports_cached_tokens`:
    its usage says how many prompt tokens the prefix cache held. `answer`: None for a form
    whose answers are plain text only; `greedy`: None when it has no greedy answers."""

    name: str
    prompt_tokens: Callable[[Body], int]
    prompt_ids: Callable[[Body], list[int]]
    max_tokens_keys: tuple[str, ...] = ("max_completion_tokens", "max_tokens")
    max_tokens_required: str | None = None
    default_max_tokens: int | None = None
    usage_always: bool = False
    error_style: Literal["openai", "anthropic"] = "openai"
    overload_status: int = 503
    reports_cached_tokens: bool = False
    answer: AnswerReading | None = None
    greedy: GreedyReading | None = None


_FORMS: dict[str, BodyForm] = {}


def _load_builtins() -> None:
    """Import the shipped forms' module (once: then it is a lookup in sys.modules; while
    it runs, its own `register_body_form` calls get the module as it stands)."""
    importlib.import_module(_BUILTIN_MODULE)


def register_body_form(form: BodyForm) -> BodyForm:
    """Add a body form; its name must be new (a ValueError says so)."""
    _load_builtins()
    if form.name in _FORMS:
        raise ValueError(f"body form {form.name!r} is already registered")
    _FORMS[form.name] = form
    return form


def body_form(name: str) -> BodyForm:
    """The form `name`; an unknown name is a ValueError that lists the known ones."""
    form = _FORMS.get(name)
    if form is None:
        _load_builtins()
        form = _FORMS.get(name)
        if form is None:
            raise ValueError(f"the sim reads no {name!r} body; it reads "
                             f"{', '.join(body_form_names())}")
    return form


def body_form_names() -> tuple[str, ...]:
    """Every registered form's name, the shipped ones first."""
    _load_builtins()
    return tuple(_FORMS)
