"""Fault injection: which misbehaviour a request gets, and its parameters.

Two ways to ask for a fault:

* deterministically, per request, with the header
  ``x-zerohop-fault: <name>[;param=value[;param=value]]``;
* by probability, in the config's ``faults:`` mapping (``name: {probability, params}``);
  the draw is seeded by ``(seed, request_id, name)`` so runs are reproducible.

Names and parameters (defaults in brackets):

====================  =================================================================
``stall_before_first``  the request makes no progress for ``s`` [2] seconds before its
                        first token (headers are sent, nothing else)
``stall_mid``           after ``after`` [3] tokens, no progress for ``s`` [2] seconds
``drop_mid``            after ``after`` [3] tokens (0: right after the headers), close
                        the connection (FIN): no terminator, no end of the chunked body
``reset``               after ``after`` [3] tokens, abort with TCP RST (SO_LINGER 0);
                        ``after=0`` resets before the status line
``slow_headers``        the status line is sent ``s`` [2] seconds late (the request waits)
``malformed_sse``       after ``after`` [3] tokens, one line that is no SSE field
                        (``zerohop-malformed-line-without-field-separator``); the stream
                        then continues normally. The SSE spec ignores such a line, so a
                        correct client still reports ``ok`` (ground truth says so)
``invalid_json``        after ``after`` [3] tokens, one ``data:`` event whose JSON is cut
                        short; the stream then continues normally
``missing_terminator``  all content, final chunk and usage are sent, then the body ends
                        and the connection closes without ``[DONE]`` / ``message_stop``
``oversized_chunk``     after ``after`` [3] tokens, one content event of ``bytes``
                        [2097152] bytes (valid JSON); counts as one token
``stream_error``        after ``after`` [3] tokens (0: before the first), an in-stream
                        error event of type ``type`` [internal_error] with ``message``
                        (then ``[DONE]`` on OpenAI paths)
``http_<code>``         an HTTP error with the API's JSON error body (429 carries
                        ``Retry-After: retry_after`` [1])
``http_<code>_nobody``  an HTTP error whose body is not JSON (an HTML proxy page)
====================  =================================================================
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

STREAM_FAULTS: dict[str, dict[str, float | int | str]] = {
    "stall_before_first": {"s": 2.0},
    "stall_mid": {"after": 3, "s": 2.0},
    "drop_mid": {"after": 3},
    "reset": {"after": 3},
    "slow_headers": {"s": 2.0},
    "malformed_sse": {"after": 3},
    "invalid_json": {"after": 3},
    "missing_terminator": {},
    "oversized_chunk": {"after": 3, "bytes": 2 * 1024 * 1024},
    "stream_error": {"after": 3, "type": "internal_error", "message": "injected stream error"},
}
HTTP_FAULT = re.compile(r"^http_(\d{3})(_nobody)?$")
HTTP_FAULT_DEFAULTS: dict[str, float | int | str] = {"retry_after": 1}

FAULT_HEADER = "x-zerohop-fault"


@dataclass(frozen=True)
class FaultSpec:
    """One fault for one request. `status` is set for http_<code> faults."""

    name: str
    params: Mapping[str, float | int | str] = field(default_factory=dict)
    status: int | None = None
    no_body: bool = False

    def number(self, key: str) -> float:
        return float(self.params[key])

    def integer(self, key: str) -> int:
        return int(float(self.params[key]))

    def text(self, key: str) -> str:
        return str(self.params[key])

    def header_value(self) -> str:
        extra = "".join(f";{k}={v}" for k, v in self.params.items())
        return self.name + extra


def parse_fault_header(value: str) -> FaultSpec:
    """`name;k=v;k=v` → FaultSpec. Raises ValueError with a readable message."""
    parts = [p.strip() for p in value.split(";") if p.strip()]
    if not parts:
        raise ValueError(f"empty {FAULT_HEADER} header")
    params: dict[str, Any] = {}
    for part in parts[1:]:
        key, sep, raw = part.partition("=")
        if not sep:
            raise ValueError(f"{FAULT_HEADER}: parameter {part!r} must be key=value")
        params[key.strip()] = raw.strip()
    return parse_fault_rule(parts[0], params)


def parse_fault_rule(name: str, params: Mapping[str, Any]) -> FaultSpec:
    """Validate a fault name and its parameters against the table above."""
    params = {k: v for k, v in params.items() if k != "probability"}
    http = HTTP_FAULT.match(name)
    if http:
        status = int(http.group(1))
        if not 400 <= status <= 599:
            raise ValueError(f"fault {name!r}: status must be 4xx or 5xx")
        defaults = HTTP_FAULT_DEFAULTS
        merged = _merge(name, defaults, params)
        return FaultSpec(name, merged, status=status, no_body=bool(http.group(2)))
    if name not in STREAM_FAULTS:
        known = ", ".join([*STREAM_FAULTS, "http_<code>", "http_<code>_nobody"])
        raise ValueError(f"unknown fault {name!r}; known: {known}")
    return FaultSpec(name, _merge(name, STREAM_FAULTS[name], params))


def _merge(
    name: str, defaults: Mapping[str, float | int | str], params: Mapping[str, Any]
) -> dict[str, float | int | str]:
    merged: dict[str, float | int | str] = dict(defaults)
    for key, raw in params.items():
        if key not in defaults:
            raise ValueError(
                f"fault {name!r} has no parameter {key!r}; it takes: "
                + (", ".join(defaults) or "none")
            )
        default = defaults[key]
        if isinstance(default, str):
            merged[key] = str(raw)
            continue
        try:
            number = float(raw)
        except (TypeError, ValueError):
            raise ValueError(f"fault {name!r}: {key} must be a number, got {raw!r}") from None
        if number < 0:
            raise ValueError(f"fault {name!r}: {key} must be >= 0")
        merged[key] = int(number) if isinstance(default, int) else number
    return merged


class FaultPlan:
    """Draws the probabilistic faults of the config for each request."""

    def __init__(self, rules: Mapping[str, Mapping[str, Any]], seed: int) -> None:
        self._rules: list[tuple[FaultSpec, float]] = []
        for name, rule in rules.items():
            probability = float(rule.get("probability", 0.0))
            spec = parse_fault_rule(name, rule)
            if probability > 0:
                self._rules.append((spec, probability))
        self._seed = seed

    def draw(self, request_id: str) -> FaultSpec | None:
        """The first configured fault whose seeded coin comes up, else None."""
        for spec, probability in self._rules:
            digest = hashlib.blake2b(
                f"{self._seed}:{request_id}:{spec.name}".encode(), digest_size=8
            ).digest()
            if int.from_bytes(digest, "little") / 2**64 < probability:
                return spec
        return None
