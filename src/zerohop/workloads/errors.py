"""The one error a bad workload file raises, and its one-line message.

Pydantic reports every failure with its own location syntax and wording; a user needs
each, as `field.path: what is wrong`, against the YAML they wrote (the union branch
names pydantic inserts into locations are not fields they wrote).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from types import MappingProxyType
from typing import Any

from pydantic import ValidationError

__all__ = ["WorkloadError", "describe_errors"]


class WorkloadError(ValueError):
    """A workload file (or a trace it points at) that cannot be used; the message names
    the file and the field path or line, and is meant to be shown as is (exit 2)."""


def describe_errors(exc: ValidationError, data: Any, branch_tags: Collection[str]) -> str:
    """`field.path: message` for each field that is wrong, joined by `; ` on one line
    (a file with two mistakes names both). A field pydantic reports more than once (one
    failure per branch of a union) is named once, by its first failure.
    `branch_tags`: the discriminator values of the models' unions (`open`, `gamma`, ...),
    which pydantic puts into locations although the user never wrote them as fields."""
    described: dict[str, str] = {}
    for error in exc.errors(include_url=False):
        path, message = _describe(error, data, branch_tags)
        described.setdefault(path, f"{path}: {message}")
    return "; ".join(described.values())


def _describe(error: Any, data: Any, branch_tags: Collection[str]) -> tuple[str, str]:
    loc = tuple(error["loc"])
    if error["type"] in ("union_tag_invalid", "union_tag_not_found"):
        loc = (*loc, str((error.get("ctx") or {}).get("discriminator", "kind")).strip("'"))
    path = _field_path(loc, data, branch_tags, missing_field=error["type"] == "missing")
    if not path:
        name = data.get("name") if isinstance(data, Mapping) else None
        path = f"workload '{name}'" if name else "<top>"
    return path, _friendly_message(error)


def _field_path(loc: tuple[int | str, ...], data: Any, branch_tags: Collection[str], *,
                missing_field: bool) -> str:
    """Render a pydantic location against the raw data, dropping union tags (`open`,
    `short_query_flood`) that pydantic inserts but the user never wrote."""
    parts: list[str] = []
    node: Any = data
    for index, item in enumerate(loc):
        if isinstance(item, int) and isinstance(node, list) and 0 <= item < len(node):
            parts.append(f"[{item}]")
            node = node[item]
        elif isinstance(node, Mapping) and item in node:
            parts.append(f".{item}" if parts else str(item))
            node = node[item]
        elif (
            index == len(loc) - 1
            and isinstance(node, Mapping)
            and (missing_field or item not in branch_tags)
        ):
            parts.append(f".{item}" if parts else str(item))  # a missing field: name it
        # else: a tag or a union branch name that is not in the data: skip it
    return "".join(parts)


_COMPARISONS: Mapping[str, tuple[str, str]] = MappingProxyType(
    {
        "greater_than": ("gt", ">"),
        "greater_than_equal": ("ge", ">="),
        "less_than": ("lt", "<"),
        "less_than_equal": ("le", "<="),
    }
)


def _friendly_message(error: Any) -> str:
    kind = error["type"]
    ctx = error.get("ctx") or {}
    if kind in _COMPARISONS:
        key, sign = _COMPARISONS[kind]
        return f"must be {sign} {_number(ctx.get(key))} (got {error.get('input')!r})"
    if kind == "missing":
        return "required field is missing"
    if kind == "extra_forbidden":
        return "unknown field (not allowed here; check the spelling)"
    if kind == "union_tag_invalid":
        return f"unknown value {ctx.get('tag')!r} (expected one of: {ctx.get('expected_tags')})"
    if kind == "union_tag_not_found":
        return "required field is missing (it selects the model for this section)"
    if kind == "value_error":
        return str(error["msg"]).removeprefix("Value error, ")
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected')} (got {error.get('input')!r})"
    return str(error["msg"])


def _number(value: Any) -> Any:
    """0.0 -> 0 in messages, so limits read as the user wrote them."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value
