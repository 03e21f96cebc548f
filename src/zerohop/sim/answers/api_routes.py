"""The sim's generation routes, read from the API registry (`zerohop.core.apis`).

Each registered API is served on its entry's `embedded_path`: the sim reads the request
body in the entry's `embedded_form`, a `body_forms.BodyForm` (how it counts the prompt,
finds max_tokens, plans tools and reasoning, and shapes its error bodies), and streams
the answer through the shape its `embedded_shape` function builds; that function's
module may register the form it reads. Routes are built once per sim, so an API
registered before the sim starts is served, and a request costs one dict lookup.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from zerohop.core.apis import API_ENTRIES, resolve_import_path
from zerohop.sim.answers.answer_plan import AnswerPlan
from zerohop.sim.answers.api_shapes import WireShape
from zerohop.sim.answers.body_forms import body_form


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
        # the shape first: its module may register the body form it reads
        make_shape = resolve_import_path(entry.embedded_shape)
        try:
            body_form(entry.embedded_form)
        except ValueError as exc:
            raise ValueError(f"api {entry.name!r}: {exc}") from None
        routes[entry.embedded_path] = ApiRoute(entry.embedded_form, make_shape)
    return routes
