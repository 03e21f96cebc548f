"""The field reference of workload specs, rendered from the models' own descriptions.

`workloads/README.md` embeds `reference_markdown()` between two marker comments and a
test compares them, so the documentation cannot drift from the code; `field_rows` gives
the same facts to anything else that wants them (CLI or Locust flag help).
"""

from __future__ import annotations

import re
import sys
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from zerohop.workloads.kind_registry import workload_kinds
from zerohop.workloads.schema.agent_spec import FunctionDefinition, ToolDefinition
from zerohop.workloads.schema.distributions import FixedDist, LognormalDist, NormalDist, UniformDist
from zerohop.workloads.schema.image_spec import ImageSpec
from zerohop.workloads.schema.kinds import TokenScaling
from zerohop.workloads.schema.load_spec import (
    ClosedLoad,
    ConstantArrival,
    GammaArrival,
    OpenLoad,
    PiecewisePoint,
    PiecewiseShape,
    PoissonArrival,
    RampShape,
    SpikeShape,
    StepPoint,
    StepShape,
    TraceLoad,
)
from zerohop.workloads.schema.lora_selection import AdapterSet
from zerohop.workloads.schema.policy_spec import (
    BackoffSpec,
    ContinuationSpec,
    FallbackSpec,
    FallbackStep,
    Policy,
    PolicyTimeouts,
    RetrySpec,
)
from zerohop.workloads.schema.session_specs import (
    MooncakeConversations,
    PrefixPool,
    ShareGptConversations,
    SyntheticConversations,
)

__all__ = [
    "REFERENCE_BEGIN",
    "REFERENCE_END",
    "FieldRow",
    "embed_reference",
    "field_rows",
    "reference_markdown",
]

REFERENCE_BEGIN = "<!-- BEGIN GENERATED FIELD REFERENCE (zerohop.workloads.reference) -->"
REFERENCE_END = "<!-- END GENERATED FIELD REFERENCE -->"

_SECTIONS: tuple[tuple[str, tuple[type[BaseModel], ...]], ...] = (
    ("Workload kinds", tuple(kind.spec for kind in workload_kinds())),
    ("Conversation sources (`source:`)",
     (SyntheticConversations, ShareGptConversations, MooncakeConversations)),
    ("Agent tools (`tools:`)", (ToolDefinition, FunctionDefinition)),
    ("Load (`load:`)", (ClosedLoad, OpenLoad, TraceLoad)),
    ("Arrivals (`load.arrival:`)", (PoissonArrival, GammaArrival, ConstantArrival)),
    (
        "Rate shapes (`load.shape:`)",
        (RampShape, StepShape, StepPoint, SpikeShape, PiecewiseShape, PiecewisePoint),
    ),
    ("Token distributions", (FixedDist, UniformDist, NormalDist, LognormalDist)),
    ("Other sections", (AdapterSet, TokenScaling, PrefixPool, ImageSpec)),
    ("Client policy (`policy:`)", (Policy, PolicyTimeouts, RetrySpec, BackoffSpec,
                                   ContinuationSpec, FallbackSpec, FallbackStep)),
)


@dataclass(frozen=True)
class FieldRow:
    """One documented field of one model."""

    model: str
    name: str
    type: str
    default: str
    description: str


def field_rows(model: type[BaseModel]) -> list[FieldRow]:
    """The fields of a spec model in declaration order."""
    rows: list[FieldRow] = []
    for name, info in model.model_fields.items():
        if info.is_required():
            default = "required"
        elif info.default_factory is not None:
            default = _show(info.default_factory())  # type: ignore[call-arg]
        else:
            default = _show(info.default)
        rows.append(
            FieldRow(
                model=model.__name__,
                name=name,
                type=_type_name(info.annotation),
                default=default,
                description=info.description or "",
            )
        )
    return rows


def reference_markdown() -> str:
    """Markdown tables of every spec model, the text between the README's markers."""
    lines: list[str] = []
    for title, models in _SECTIONS:
        lines += [f"### {title}", ""]
        for model in models:
            doc = " ".join((model.__doc__ or "").split())
            lines += [f"**{model.__name__}**: {doc}", ""]
            lines += ["| field | type | default | meaning |", "|---|---|---|---|"]
            for row in field_rows(model):
                cells = (row.name, row.type, row.default, row.description)
                lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _show(value: Any) -> str:
    if value is PydanticUndefined:
        return "required"
    if isinstance(value, BaseModel):
        return str(value.model_dump(exclude_defaults=True))
    if isinstance(value, list) and value and all(isinstance(v, BaseModel) for v in value):
        return f"{len(value)} × {type(value[0]).__name__} (see meaning)"
    return repr(value)


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _type_name(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(_type_name(arg) for arg in typing.get_args(annotation))
    if origin is typing.Literal:
        return " \\| ".join(repr(arg) for arg in typing.get_args(annotation))
    if origin is list:
        return f"list[{_type_name(typing.get_args(annotation)[0])}]"
    if annotation is type(None):
        return "None"
    return getattr(annotation, "__name__", str(annotation))


def _cell(text: str) -> str:
    """Escape table pipes that are not escaped yet."""
    return re.sub(r"(?<!\\)\|", r"\\|", text.replace("\n", " "))


def embed_reference(readme_text: str) -> str:
    """The README text with its generated section replaced by the current reference."""
    begin, end = readme_text.find(REFERENCE_BEGIN), readme_text.find(REFERENCE_END)
    if begin < 0 or end < begin:
        raise ValueError("README lacks the generated-reference markers")
    head = readme_text[: begin + len(REFERENCE_BEGIN)]
    return head + "\n\n" + reference_markdown() + "\n" + readme_text[end:]


def _rewrite_readme(path: Path) -> None:
    path.write_text(embed_reference(path.read_text(encoding="utf-8")), encoding="utf-8")


if __name__ == "__main__":
    _rewrite_readme(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("workloads/README.md"))
