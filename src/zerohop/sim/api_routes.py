"""The sim's generation routes, read from the API registry (`zerohop.core.apis`).

Each registered API is served on its entry's `embedded_path`: the sim reads the request
body in the entry's `embedded_form` (how it counts the prompt, finds max_tokens, plans
tools and reasoning, and shapes its error bodies) and streams the answer through the
shape its `embedded_shape` function builds. Routes are built once per sim, so an API
registered before the sim starts is served, and a request costs one dict lookup.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from zerohop.core.apis import API_ENTRIES, resolve_import_path
from zerohop.sim.answer_plan import AnswerPlan
from zerohop.sim.api_shapes import WireShape

# the request bodies the sim reads (app.py's generation fields, tokenize.py's prompt ids)
BODY_FORMS = ("chat", "completions", "messages", "responses")


class ShapeFunction(Protocol):
    """What an entry's `embedded_shape` names (answer_shapes.chat_shape is one)."""

    def __call__(self, answer: AnswerPlan, *, request_id: str, model: str,
                 include_usage: bool, prompt_tokens: int, cached_tokens: int | None,
                 word_offset: int = 0, max_tokens: int = 0) -> WireShape: ...


@dataclass(frozen=True, slots=True)
class ApiRoute:
    """One generation path: the body form the sim reads there and its stream's shape."""

    form: str
    make_shape: ShapeFunction


def api_routes() -> dict[str, ApiRoute]:
    """Path -> route for every registered API; an unknown body form is a ValueError."""
    routes = {}
    for entry in API_ENTRIES.values():
        if entry.embedded_form not in BODY_FORMS:
            raise ValueError(f"api {entry.name!r}: the sim reads no {entry.embedded_form!r} "
                             f"body; it reads {', '.join(BODY_FORMS)}")
        routes[entry.embedded_path] = ApiRoute(entry.embedded_form,
                                               resolve_import_path(entry.embedded_shape))
    return routes
