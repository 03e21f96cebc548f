"""W3C Server-Timing, read once for every analysis that prices a hop from it: a layer's
`layer;dur=` (the time budget's hop), its `route;desc=` (the arms' route counts) and a
PD decode's parts (`analysis.pd_split`)."""

from __future__ import annotations


def server_timing_entries(value: str | None) -> dict[str, dict[str, str]]:
    """`name;dur=ms;desc="..."`, comma-separated → name → its params (keys lower-case,
    values unquoted); the first entry of a name wins."""
    entries: dict[str, dict[str, str]] = {}
    for entry in (value or "").split(","):
        parts = [p.strip() for p in entry.split(";")]
        if not parts[0] or parts[0] in entries:
            continue
        params = {}
        for param in parts[1:]:
            key, _, raw = param.partition("=")
            params[key.strip().lower()] = raw.strip().strip('"')
        entries[parts[0]] = params
    return entries


def server_timing_ms(value: str | None, name: str) -> float | None:
    """The `dur` of entry `name`; None when absent or unreadable."""
    raw = server_timing_entries(value).get(name, {}).get("dur")
    try:
        return float(raw) if raw is not None else None
    except ValueError:
        return None


def server_timing_desc(value: str | None, name: str) -> str | None:
    """The `desc` of entry `name`; None when absent or empty."""
    return server_timing_entries(value).get(name, {}).get("desc") or None
