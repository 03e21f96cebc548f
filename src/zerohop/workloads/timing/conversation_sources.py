"""The shapes of recorded conversations: how many turns, how long each new user message
and each answer, read from a ShareGPT file or rebuilt from the Mooncake trace.

Only lengths are kept: a conversation workload sends text zerohop generates itself (of
those lengths), so no recorded content is replayed. A file that cannot be read raises
`WorkloadError` naming the file.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zerohop.workloads.content.prompts import count_regex_tokens
from zerohop.workloads.errors import WorkloadError
from zerohop.workloads.timing.traces import (
    ASSISTANT_ROLES,
    HUMAN_ROLES,
    TraceRequest,
    load_sharegpt_conversations,
    read_mooncake_jsonl,
)

__all__ = [
    "SessionShape",
    "TurnShape",
    "mooncake_sessions",
    "read_session_shapes",
    "read_sharegpt_sessions",
]

MIN_SHARED_BLOCKS = 2
"""A Mooncake request continues an earlier one only when it repeats at least this many
of its 512-token blocks: every request of the trace shares block 0 (a common system
prompt), which alone says nothing about a session."""


@dataclass(frozen=True)
class TurnShape:
    """One turn: the new user message's tokens, the answer's (None: the source has no
    answer), and the trace time since the previous turn arrived (None: not timed)."""

    user_tokens: int
    answer_tokens: int | None
    gap_s: float | None = None


SessionShape = tuple[TurnShape, ...]


def read_session_shapes(source: Any) -> list[SessionShape]:
    """The sessions of a file source (`sharegpt` or `mooncake`), cut at its
    `max_conversations`; WorkloadError when the file holds none."""
    if source.type == "sharegpt":
        sessions = read_sharegpt_sessions(source.path)
    elif source.type == "mooncake":
        sessions = mooncake_sessions(read_mooncake_jsonl(source.path))
    else:
        raise ValueError(f"source {source.type!r} is not read from a file")
    if source.max_conversations is not None:
        sessions = sessions[: source.max_conversations]
    if not sessions:
        raise WorkloadError(f"{source.path}: holds no conversation with a user turn")
    return sessions


def read_sharegpt_sessions(path: Path) -> list[SessionShape]:
    """ShareGPT-style JSON: each human message is a turn; the assistant reply right after
    it is the turn's answer. Conversations without a human message are skipped."""
    try:
        with Path(path).open(encoding="utf-8") as handle:
            conversations = load_sharegpt_conversations(handle, path)
    except OSError as exc:
        raise WorkloadError(f"{path}: cannot read conversations: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise WorkloadError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    sessions: list[SessionShape] = []
    for messages in conversations:
        turns = _sharegpt_turns(messages)
        if turns:
            sessions.append(turns)
    return sessions


def _sharegpt_turns(messages: list[Any]) -> SessionShape:
    turns: list[TurnShape] = []
    for position, message in enumerate(messages):
        text = _text_of(message, HUMAN_ROLES)
        if text is None:
            continue
        following = messages[position + 1] if position + 1 < len(messages) else None
        answer = _text_of(following, ASSISTANT_ROLES)
        turns.append(TurnShape(
            user_tokens=max(1, count_regex_tokens(text)),
            answer_tokens=max(1, count_regex_tokens(answer)) if answer is not None else None,
        ))
    return tuple(turns)


def _text_of(message: Any, roles: frozenset[str]) -> str | None:
    if not isinstance(message, dict) or message.get("from") not in roles:
        return None
    value = message.get("value")
    return value if isinstance(value, str) and value.strip() else None


def mooncake_sessions(rows: Sequence[TraceRequest]) -> list[SessionShape]:
    """Sessions of the Mooncake conversation trace, whose rows carry no session id: a
    row whose hash blocks start with the complete blocks of a session's latest row (at
    least `MIN_SHARED_BLOCKS` of them) is that session's next turn; its new user message
    is its input less the earlier input and answer. A second continuation of one row
    starts a session of its own (its first turn then holds the whole context)."""
    sessions: list[list[TurnShape]] = []
    latest: list[TraceRequest] = []  # each session's latest row
    tails: dict[tuple[int, ...], int] = {}  # complete blocks of a latest row -> session
    for row in rows:
        blocks = row.hash_ids
        found = None
        for length in range(len(blocks) - 1, MIN_SHARED_BLOCKS - 1, -1):
            found = tails.get(blocks[:length])
            if found is not None:
                break
        if found is None:
            sessions.append([TurnShape(row.input_tokens, max(1, row.output_tokens or 0))])
            latest.append(row)
            found = len(sessions) - 1
        else:
            previous = latest[found]
            added = row.input_tokens - previous.input_tokens - (previous.output_tokens or 0)
            gap = None
            if row.offset_s is not None and previous.offset_s is not None:
                gap = max(0.0, row.offset_s - previous.offset_s)
            sessions[found].append(TurnShape(max(1, added), max(1, row.output_tokens or 0), gap))
            if tails.get(_complete_blocks(previous)) == found:
                del tails[_complete_blocks(previous)]
            latest[found] = row
        tails[_complete_blocks(row)] = found
    return [tuple(turns) for turns in sessions]


def _complete_blocks(row: TraceRequest) -> tuple[int, ...]:
    """The row's full 512-token blocks: its last block may be partial."""
    return row.hash_ids[:-1] if len(row.hash_ids) > 1 else row.hash_ids
