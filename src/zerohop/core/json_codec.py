"""JSON on the per-request path: orjson, several times faster than the standard library
at the sizes the client handles (a request body, an SSE event, a record row; see
tests/bench/bench_open_loop_sender.py), with the standard library's verdict kept for
input orjson refuses but Python's `json` reads (NaN, Infinity). One difference is left:
an integer past 64 bits reads as a float (no token count is that large)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import orjson

_NUMPY = orjson.OPT_SERIALIZE_NUMPY


def loads(data: str | bytes) -> Any:
    """Parse JSON text; raises ValueError (or RecursionError) as `json.loads` would."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)  # the slow path decides: accepts what json accepts


def dumps(obj: Any, default: Callable[[Any], Any] | None = None) -> bytes:
    """Compact UTF-8 JSON (no spaces, non-ASCII as is; NaN and infinities as null)."""
    return orjson.dumps(obj, default=default, option=_NUMPY)
