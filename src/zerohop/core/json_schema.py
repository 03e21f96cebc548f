"""The part of JSON Schema a structured-output workload may use, checked without a library.

zerohop does not depend on a JSON Schema library, so it supports a stated subset and
refuses a schema that steps outside it (a keyword it would silently ignore would make
the validity share a lie). Supported keywords: `type` (one name or a list), `properties`,
`required`, `additionalProperties` (true/false), `items`, `enum`, `const`,
`minLength`/`maxLength`, `minimum`/`maximum`, `minItems`/`maxItems`; and the annotations
`title`, `description`, `default`, `examples`, `$schema`. Types: object, array, string,
integer, number, boolean, null (an integer is a number; a bool is neither).
"""

from __future__ import annotations

from typing import Any

__all__ = ["check_schema", "schema_violation"]

_CHECKED = frozenset({
    "type", "properties", "required", "additionalProperties", "items", "enum", "const",
    "minLength", "maxLength", "minimum", "maximum", "minItems", "maxItems",
})
_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$schema"})
_TYPES = frozenset({"object", "array", "string", "integer", "number", "boolean", "null"})


def check_schema(schema: object, where: str = "response_format") -> None:
    """ValueError naming the first place `schema` uses something outside the subset."""
    if not isinstance(schema, dict):
        raise ValueError(f"{where}: a schema must be a mapping")
    unknown = sorted(set(schema) - _CHECKED - _ANNOTATIONS)
    if unknown:
        raise ValueError(f"{where}: unsupported JSON Schema keyword(s) {unknown}; supported: "
                         f"{', '.join(sorted(_CHECKED))}")
    kinds = schema.get("type")
    for kind in kinds if isinstance(kinds, list) else [] if kinds is None else [kinds]:
        if kind not in _TYPES:
            raise ValueError(f"{where}.type: {kind!r} is not one of {', '.join(sorted(_TYPES))}")
    properties = schema.get("properties", {})
    if not isinstance(properties, dict):
        raise ValueError(f"{where}.properties: must be a mapping")
    for name, sub in properties.items():
        check_schema(sub, f"{where}.properties.{name}")
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise ValueError(f"{where}.required: must be a list of property names")
    if not isinstance(schema.get("additionalProperties", True), bool):
        raise ValueError(f"{where}.additionalProperties: only true or false is supported")
    if "items" in schema:
        check_schema(schema["items"], f"{where}.items")
    if "enum" in schema and not (isinstance(schema["enum"], list) and schema["enum"]):
        raise ValueError(f"{where}.enum: must be a non-empty list")


def schema_violation(instance: Any, schema: dict[str, Any], path: str = "$") -> str | None:
    """Where and how `instance` breaks `schema` (a schema `check_schema` accepted); None
    when it follows it."""
    kinds = schema.get("type")
    if kinds is not None:
        allowed = kinds if isinstance(kinds, list) else [kinds]
        if not any(_is_type(instance, kind) for kind in allowed):
            return f"{path}: not of type {'/'.join(allowed)}"
    if "const" in schema and instance != schema["const"]:
        return f"{path}: not the constant {schema['const']!r}"
    if "enum" in schema and instance not in schema["enum"]:
        return f"{path}: not one of the enum's values"
    if isinstance(instance, str):
        return _bounds(len(instance), schema, "minLength", "maxLength", path, "length")
    if _is_type(instance, "number"):
        return _bounds(instance, schema, "minimum", "maximum", path, "value")
    if isinstance(instance, list):
        found = _bounds(len(instance), schema, "minItems", "maxItems", path, "items")
        items = schema.get("items")
        if found is None and isinstance(items, dict):
            found = next((v for i, item in enumerate(instance)
                          if (v := schema_violation(item, items, f"{path}[{i}]")) is not None),
                         None)
        return found
    if isinstance(instance, dict):
        return _object_violation(instance, schema, path)
    return None


def _object_violation(instance: dict[str, Any], schema: dict[str, Any], path: str
                      ) -> str | None:
    properties: dict[str, Any] = schema.get("properties", {})
    missing = [name for name in schema.get("required", []) if name not in instance]
    if missing:
        return f"{path}: missing required {missing}"
    if schema.get("additionalProperties", True) is False:
        extra = sorted(set(instance) - set(properties))
        if extra:
            return f"{path}: properties not allowed {extra}"
    for name, value in instance.items():
        sub = properties.get(name)
        if sub is not None:
            found = schema_violation(value, sub, f"{path}.{name}")
            if found is not None:
                return found
    return None


def _bounds(value: float, schema: dict[str, Any], low: str, high: str, path: str,
            what: str) -> str | None:
    if low in schema and value < schema[low]:
        return f"{path}: {what} {value} below {low} {schema[low]}"
    if high in schema and value > schema[high]:
        return f"{path}: {what} {value} above {high} {schema[high]}"
    return None


def _is_type(value: Any, kind: str) -> bool:
    if kind == "null":
        return value is None
    if kind == "boolean":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if kind == "integer":
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if kind == "number":
        return isinstance(value, int | float)
    return isinstance(value, {"string": str, "array": list, "object": dict}[kind])
