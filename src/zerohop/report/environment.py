"""The environment and configuration section, with secrets redacted again.

The run already redacts secrets in manifest.json; the report does it a second time
because a report is shared further than a results folder, and one missed key in a
producer must not become a leaked credential in a page mailed to a whole team. Both
passes apply the one rule of `zerohop.core.redaction`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from zerohop.core.redaction import redact

__all__ = ["environment_rows", "flatten", "redact"]


def flatten(value: Any, prefix: str = "") -> list[tuple[str, str]]:
    """Nested config → (dotted.key, text) rows for a two-column table."""
    if isinstance(value, Mapping):
        if not value:
            return [(prefix, "{}")] if prefix else []
        rows: list[tuple[str, str]] = []
        for k, v in value.items():
            rows.extend(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return rows
    if isinstance(value, list | tuple):
        if all(not isinstance(v, Mapping | list | tuple) for v in value):
            return [(prefix, ", ".join(_scalar(v) for v in value) if value else "[]")]
        rows = []
        for i, v in enumerate(value):
            rows.extend(flatten(v, f"{prefix}[{i}]"))
        return rows
    return [(prefix, _scalar(value))]


def environment_rows(manifest: Mapping[str, Any]) -> dict[str, list[tuple[str, str]]]:
    """The manifest's descriptive blocks, redacted and flattened, by heading."""
    safe = redact(dict(manifest))
    blocks = {
        "Run": {
            k: safe.get(k)
            for k in ("run_id", "name", "status", "end_reason", "started_at", "ended_at")
            if k in safe
        }
        | ({"duration_s": safe["duration_s"]} if "duration_s" in safe else {}),
        "Target": safe.get("target") or {},
        "Load": safe.get("load") or {},
        "SLO": safe.get("slo") or {},
        "Workloads": safe.get("workloads") or [],
        "Host": safe.get("host") or {},
        "GPU": safe.get("gpu") or [],
        "Versions": safe.get("versions") or {},
        "Locust": safe.get("locust") or {},
        "Configuration": safe.get("config") or {},
    }
    return {title: flatten(body) for title, body in blocks.items() if body}


def _scalar(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
