"""Readers for public LLM-serving traces, and the replay window.

Every reader returns `TraceRequest`s in arrival order with offsets in seconds from the
trace's first request, so a replay is `offset / speed`: scaling time keeps the burst
shape (per-second counts are the trace's, compressed). Formats:

* Azure LLM inference CSV (`TIMESTAMP,ContextTokens,GeneratedTokens`; timestamps like
  `2023-11-16 18:17:03.9799600`, 7 fractional digits, or with a `+00:00` offset);
* Mooncake JSONL (`timestamp` in ms, `input_length`, `output_length`, `hash_ids` of
  512-token prefix blocks);
* ShareGPT-style JSON (a list of `{"conversations": [{"from", "value"}, ...]}`): no
  timestamps, lengths counted with the embedded target's rule (one token per
  `\\w+|[^\\w\\s]` match; roughly what BPE tokenizers give for English prose).

A file that cannot be read or parsed raises `WorkloadError` naming the file and line.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from zerohop.workloads.content.prompts import count_regex_tokens
from zerohop.workloads.errors import WorkloadError

__all__ = [
    "ASSISTANT_ROLES",
    "HUMAN_ROLES",
    "MOONCAKE_BLOCK_TOKENS",
    "TraceRequest",
    "detect_format",
    "load_sharegpt_conversations",
    "read_azure_csv",
    "read_mooncake_jsonl",
    "read_sharegpt_json",
    "read_trace",
    "replay_window",
]

MOONCAKE_BLOCK_TOKENS = 512


@dataclass(frozen=True)
class TraceRequest:
    """One request of a trace. `offset_s` is None for traces without timestamps;
    `output_tokens` is None where the trace has no answer length."""

    offset_s: float | None
    input_tokens: int
    output_tokens: int | None
    prefix_group: int | None = None  # Mooncake: the first hash block (shared prefix)
    row: int = 0  # 0-based position in the file (trace_row of the plan)
    hash_ids: tuple[int, ...] = ()


def read_trace(path: Path, trace_format: str = "auto") -> list[TraceRequest]:
    """Read any supported trace; `auto` picks the reader by extension."""
    path = Path(path)
    fmt = detect_format(path) if trace_format == "auto" else trace_format
    reader = _READERS.get(fmt)
    if reader is None:
        raise WorkloadError(f"{path}: unknown trace format '{fmt}' (have: {', '.join(_READERS)})")
    try:
        requests = reader(path)
    except UnicodeDecodeError as exc:
        raise WorkloadError(
            f"{path}: trace: not UTF-8 text (byte {exc.start}: {exc.reason})"
        ) from None
    if not requests:
        raise WorkloadError(f"{path}: the trace holds no requests")
    return requests


def detect_format(path: Path) -> str:
    suffix = Path(path).suffix.lower()
    found = _SUFFIXES.get(suffix)
    if found is None:
        raise WorkloadError(
            f"{path}: cannot tell the trace format from '{suffix}' "
            "(.csv = azure_csv, .jsonl = mooncake_jsonl, .json = sharegpt_json)"
        )
    return found


def replay_window(
    requests: Sequence[TraceRequest],
    *,
    speed: float = 1.0,
    start_offset_s: float = 0.0,
    duration_s: float | None = None,
    max_requests: int | None = None,
) -> list[TraceRequest]:
    """The part of a trace a replay sends, offsets rebased to the window's start and
    divided by `speed`. `start_offset_s` is trace time; `duration_s` is run time (the
    window covers duration_s × speed of trace time). Timestamp-less traces keep None
    offsets and are only cut by max_requests."""
    if speed <= 0:
        raise ValueError("speed must be > 0")
    chosen: list[TraceRequest] = []
    end_trace_s = None if duration_s is None else start_offset_s + duration_s * speed
    for request in requests:
        if max_requests is not None and len(chosen) >= max_requests:
            break
        if request.offset_s is None:
            chosen.append(request)
            continue
        if request.offset_s < start_offset_s:
            continue
        if end_trace_s is not None and request.offset_s >= end_trace_s:
            break
        chosen.append(replace(request, offset_s=(request.offset_s - start_offset_s) / speed))
    return chosen


def speed_for_rate(
    requests: Sequence[TraceRequest],
    rate_rps: float,
    *,
    start_offset_s: float = 0.0,
    duration_s: float | None = None,
) -> float:
    """The replay speed at which this trace offers `rate_rps` over a replay of
    `duration_s` run seconds, its arrivals' shape kept and only its clock scaled: the
    window must hold rate × duration arrivals, so it ends (in trace time) halfway between
    that many and one more (arrivals sharing a timestamp enter together: the nearest such
    count), and the speed is that span over the duration. A trace is not
    steady (the Azure conversation trace's first 30 s hold 2.5× fewer arrivals than its
    mean), so a mean rate scaled by a ratio would miss. Past the trace's end the span is
    extrapolated at its mean rate (the replay then ends early, with fewer arrivals);
    without a duration the whole trace is scaled by its mean rate. ValueError for a trace
    without timestamps (it has no rate to scale)."""
    if any(r.offset_s is None for r in requests):
        raise ValueError("the trace has no arrival times to scale")
    offsets = np.sort(np.array([r.offset_s for r in requests if r.offset_s is not None],
                               dtype=float))
    offsets = offsets[offsets >= start_offset_s] - start_offset_s
    if offsets.size < 2 or not offsets[-1] > 0:
        raise ValueError("the trace's window has no length")
    if duration_s is None:
        return rate_rps * float(offsets[-1]) / offsets.size
    wanted = rate_rps * duration_s
    times, ties = np.unique(offsets, return_counts=True)
    held = np.cumsum(ties)  # a window ending just after times[i] holds held[i] arrivals
    if wanted >= offsets.size or times.size < 2:
        return float(offsets[-1]) * (wanted + 0.5) / offsets.size / duration_s
    # arrivals that share a timestamp enter together: the cut nearest the count wanted
    i = int(np.argmin(np.abs(held[:-1] - wanted)))
    return float(times[i] + times[i + 1]) / 2.0 / duration_s


# --- Azure CSV -------------------------------------------------------------------------------
_AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
_TIMESTAMP = re.compile(
    r"^\s*(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?"
    r"\s*(Z|[+-]\d{2}:?\d{2})?\s*$"
)


def read_azure_csv(path: Path) -> list[TraceRequest]:
    """Azure LLM inference trace (2023 and 2024 forms)."""
    rows: list[tuple[int, int, int, int]] = []  # (ns since epoch, input, output, row)
    with _open_text(path) as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None or tuple(h.strip() for h in header[:3]) != _AZURE_COLUMNS:
            raise WorkloadError(
                f"{path}: line 1: expected header {','.join(_AZURE_COLUMNS)}, got {header}"
            )
        for row_index, fields in enumerate(reader):
            line = reader.line_num
            if not fields:
                continue
            if len(fields) < 3:
                raise WorkloadError(f"{path}: line {line}: expected 3 columns, got {len(fields)}")
            stamp_ns = _parse_timestamp_ns(fields[0], path, line)
            rows.append(
                (
                    stamp_ns,
                    _count(fields[1], "ContextTokens", path, line),
                    _count(fields[2], "GeneratedTokens", path, line),
                    row_index,
                )
            )
    if not rows:
        return []
    rows.sort(key=lambda r: r[0])  # the published files are sorted; make sure
    first_ns = rows[0][0]
    return [
        TraceRequest(offset_s=(ns - first_ns) / 1e9, input_tokens=i, output_tokens=o, row=r)
        for ns, i, o, r in rows
    ]


def _parse_timestamp_ns(text: str, path: Path, line: int) -> int:
    """Nanoseconds since the epoch; all 7 (up to 9) fractional digits kept."""
    match = _TIMESTAMP.match(text)
    if match is None:
        raise WorkloadError(f"{path}: line {line}: TIMESTAMP {text!r} is not a date-time")
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    fraction, zone = match.group(7) or "", match.group(8)
    try:
        tz = _zone(zone)
        whole = datetime(year, month, day, hour, minute, second, tzinfo=tz)
    except ValueError as exc:
        raise WorkloadError(f"{path}: line {line}: TIMESTAMP {text!r}: {exc}") from None
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    seconds = (whole - epoch) // timedelta(seconds=1)
    return seconds * 1_000_000_000 + int(fraction.ljust(9, "0") or 0)


def _zone(text: str | None) -> timezone:
    if text is None or text == "Z":
        return UTC  # naive stamps: only differences matter
    sign = 1 if text[0] == "+" else -1
    digits = text[1:].replace(":", "")
    return timezone(sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:])))


# --- Mooncake JSONL -------------------------------------------------------------------------
def read_mooncake_jsonl(path: Path) -> list[TraceRequest]:
    """Mooncake/Kimi trace: ms timestamps, lengths, and 512-token prefix blocks."""
    items: list[tuple[float, TraceRequest]] = []
    with _open_text(path) as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise WorkloadError(
                    f"{path}: line {line_number}: invalid JSON: {exc.msg}"
                ) from None
            if not isinstance(record, dict):
                raise WorkloadError(f"{path}: line {line_number}: expected a JSON object")
            stamp_ms = _number(record, "timestamp", path, line_number)
            hash_ids = record.get("hash_ids") or []
            if not isinstance(hash_ids, list) or not all(isinstance(h, int) for h in hash_ids):
                raise WorkloadError(f"{path}: line {line_number}: hash_ids must be a list of ints")
            request = TraceRequest(
                offset_s=None,
                input_tokens=_count(record.get("input_length"), "input_length", path, line_number),
                output_tokens=_count(
                    record.get("output_length"), "output_length", path, line_number
                ),
                prefix_group=hash_ids[0] if hash_ids else None,
                row=len(items),
                hash_ids=tuple(hash_ids),
            )
            items.append((stamp_ms, request))
    if not items:
        return []
    items.sort(key=lambda item: item[0])
    first_ms = items[0][0]
    return [replace(request, offset_s=(ms - first_ms) / 1e3) for ms, request in items]


# --- ShareGPT JSON --------------------------------------------------------------------------
HUMAN_ROLES = frozenset({"human", "user"})  # the `from` of a user's message
ASSISTANT_ROLES = frozenset({"gpt", "assistant", "chatgpt", "bard", "bing"})


def read_sharegpt_json(path: Path) -> list[TraceRequest]:
    """ShareGPT-style conversations: the first human turn is the prompt, the turn after
    it (if any) the answer. Entries without a human turn are skipped."""
    with _open_text(path) as handle:
        conversations = load_sharegpt_conversations(handle, path)
    requests: list[TraceRequest] = []
    for index, turns in enumerate(conversations):
        prompt, answer = _first_exchange(turns)
        if prompt is None:
            continue
        input_tokens = max(1, count_regex_tokens(prompt))
        output_tokens = max(1, count_regex_tokens(answer)) if answer is not None else None
        requests.append(TraceRequest(None, input_tokens, output_tokens, row=index))
    return requests


def load_sharegpt_conversations(handle: Any, path: Path) -> list[list[Any]]:
    """The messages of each conversation of an open ShareGPT-style JSON file (a list of
    entries, each with a 'conversations' list); WorkloadError when it is not one."""
    try:
        data = json.load(handle)
    except json.JSONDecodeError as exc:
        raise WorkloadError(f"{path}: line {exc.lineno}: invalid JSON: {exc.msg}") from None
    if not isinstance(data, list):
        raise WorkloadError(f"{path}: expected a JSON list of conversations")
    conversations: list[list[Any]] = []
    for index, entry in enumerate(data):
        messages = entry.get("conversations") if isinstance(entry, dict) else None
        if not isinstance(messages, list):
            raise WorkloadError(f"{path}: entry {index}: expected a 'conversations' list")
        conversations.append(messages)
    return conversations


def _first_exchange(turns: list[Any]) -> tuple[str | None, str | None]:
    for position, turn in enumerate(turns):
        if not isinstance(turn, dict) or turn.get("from") not in HUMAN_ROLES:
            continue
        prompt = turn.get("value")
        if not isinstance(prompt, str) or not prompt.strip():
            return None, None
        following = turns[position + 1] if position + 1 < len(turns) else None
        answer = None
        if isinstance(following, dict) and following.get("from") in ASSISTANT_ROLES:
            value = following.get("value")
            answer = value if isinstance(value, str) and value.strip() else None
        return prompt, answer
    return None, None


# --- shared helpers --------------------------------------------------------------------------
def _open_text(path: Path) -> Any:
    try:
        return Path(path).open(encoding="utf-8", newline="")
    except OSError as exc:
        raise WorkloadError(f"{path}: cannot read trace: {exc.strerror or exc}") from None


def _count(value: Any, name: str, path: Path, line: int) -> int:
    try:
        count = int(str(value).strip()) if not isinstance(value, int) else value
    except ValueError:
        raise WorkloadError(f"{path}: line {line}: {name} {value!r} is not an integer") from None
    if count < 0:
        raise WorkloadError(f"{path}: line {line}: {name} must be >= 0 (got {count})")
    return max(count, 1) if name in ("ContextTokens", "input_length") else count


def _number(record: Mapping[str, Any], name: str, path: Path, line: int) -> float:
    value = record.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise WorkloadError(f"{path}: line {line}: {name} must be a number (got {value!r})")
    return float(value)


_READERS: Mapping[str, Callable[[Path], list[TraceRequest]]] = MappingProxyType(
    {
        "azure_csv": read_azure_csv,
        "mooncake_jsonl": read_mooncake_jsonl,
        "sharegpt_json": read_sharegpt_json,
    }
)
_SUFFIXES: Mapping[str, str] = MappingProxyType(
    {".csv": "azure_csv", ".jsonl": "mooncake_jsonl", ".json": "sharegpt_json"}
)
