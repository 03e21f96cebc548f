"""Server-sent events: bytes in, events out, no HTTP library involved.

The transports keep the raw bytes of a stream together with the time each read arrived
(the hot path keeps them raw); this parser turns those bytes into events afterwards, so it
must give the same events however the bytes were split into reads, and it must be cheap.
It follows the WHATWG "event stream interpretation" rules: LF, CRLF and lone CR end a
line; a blank line dispatches the event; `:` lines are comments; an event without data
lines is not dispatched; an unterminated event at end of stream is never dispatched (the
API's terminator event, not the last bytes, says a stream ended). It works on bytes (a CR
or LF byte never occurs inside a multi-byte UTF-8 sequence, so splitting before decoding
is safe) and decodes each field once, with replacement characters for invalid UTF-8, so
garbage input never raises.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_MAX_EVENT_BYTES = 16 * 1024 * 1024

_LF_BYTE = 0x0A
_COLON_BYTE = 0x3A
_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched event. `id` is the stream's last event ID when the event was
    dispatched (the spec's `lastEventId`: it persists until an `id:` field changes it)."""

    data: str
    event: str | None
    id: str | None = None


class SSEOverflow(ValueError):
    """An event grew past `max_event_bytes`: a broken or hostile stream, not data to keep.
    The parser's state is undefined afterwards; abandon the stream."""


class SSEParser:
    """Incremental SSE parser: `feed` raw chunks as they were read.

    Events completed by a chunk are returned by that `feed` call, in stream order.
    """

    __slots__ = (
        "_data_bytes",
        "_data_lines",
        "_data_lines_counted",
        "_event_type",
        "_head",
        "_last_id",
        "_max_event_bytes",
        "_pending",
        "_skip_lf",
        "_started",
    )

    def __init__(self, *, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        if max_event_bytes < 1:
            raise ValueError(f"max_event_bytes must be >= 1, got {max_event_bytes}")
        self._max_event_bytes = max_event_bytes
        self._started = False  # past the optional leading byte-order mark
        self._head = b""  # first bytes held back while they may still be a BOM
        self._pending = bytearray()  # the current line, not yet terminated
        self._skip_lf = False  # the last line ended in CR: a following LF belongs to it
        self._data_lines: list[bytes | bytearray] = []
        self._data_bytes = 0  # size of _data_lines[:_data_lines_counted], for the bound
        self._data_lines_counted = 0
        self._event_type: bytes | None = None
        self._last_id: str | None = None

    # --- public API -------------------------------------------------------------------
    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Consume one read's bytes; return the events this chunk completed."""
        if not self._started:
            chunk = self._strip_bom(chunk)
        if not chunk:
            return []
        if self._skip_lf:
            self._skip_lf = False
            if chunk[0] == _LF_BYTE:
                chunk = chunk[1:]
                if not chunk:
                    return []
        pending = self._pending
        if b"\r" in chunk:
            # A CR at the very end ends its line now; an LF at the start of the next
            # chunk is then the second half of a CRLF, not an extra blank line.
            self._skip_lf = chunk.endswith(b"\r")
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        elif b"\n" not in chunk:
            pending += chunk
            self._check_size()
            return []
        lines: list[bytes] | list[bytearray]
        if pending:
            pending += chunk
            lines = pending.split(b"\n")  # copies: the buffer can be reused
            pending.clear()
        else:
            lines = chunk.split(b"\n")
        tail = lines.pop()  # the unterminated rest of the chunk (often empty)
        if tail:
            pending += tail
        events = self._process_lines(lines)
        if pending or self._data_lines:
            self._check_size()
        return events

    # --- helpers ----------------------------------------------------------------------
    def _strip_bom(self, chunk: bytes) -> bytes:
        """Drop one UTF-8 byte-order mark at the very start, even when split."""
        head = self._head + chunk
        if len(head) < len(_BOM) and _BOM.startswith(head):
            self._head = head
            return b""
        self._started = True
        self._head = b""
        return head[len(_BOM) :] if head.startswith(_BOM) else head

    def _process_lines(self, lines: list[bytes] | list[bytearray]) -> list[SSEEvent]:
        events: list[SSEEvent] = []
        data_lines = self._data_lines
        for line in lines:
            if line.startswith(b"data: "):  # the common case, kept on the shortest path
                data_lines.append(line[6:])
            elif not line:
                if data_lines:
                    events.append(self._dispatch())
                    data_lines = self._data_lines
                else:
                    self._event_type = None  # spec: an event without data is not sent
            elif line[0] != _COLON_BYTE:  # `:` starts a comment / keep-alive
                colon = line.find(b":")
                if colon < 0:
                    self._apply_field(bytes(line), b"")
                else:
                    value = line[colon + 1 :]
                    if value[:1] == b" ":
                        value = value[1:]
                    self._apply_field(bytes(line[:colon]), value)
        return events

    def _apply_field(self, name: bytes, value: bytes | bytearray) -> None:
        if name == b"data":
            self._data_lines.append(value)
        elif name == b"event":
            self._event_type = bytes(value)
        elif name == b"id" and b"\x00" not in value:
            self._last_id = value.decode("utf-8", "replace")
        # any other field name is ignored (spec); so is `retry`: zerohop never reconnects

    def _dispatch(self) -> SSEEvent:
        data_lines = self._data_lines
        raw = data_lines[0] if len(data_lines) == 1 else b"\n".join(data_lines)
        event_type = self._event_type
        event = SSEEvent(
            data=raw.decode("utf-8", "replace"),
            event=event_type.decode("utf-8", "replace") if event_type else None,
            id=self._last_id,
        )
        self._data_lines = []
        self._data_bytes = self._data_lines_counted = 0
        self._event_type = None
        return event

    def _check_size(self) -> None:
        """Bound the memory of one event. Counted here, once per read, not per line;
        a data line costs its length plus one, so empty lines count too."""
        data_lines = self._data_lines
        if len(data_lines) > self._data_lines_counted:
            for value in data_lines[self._data_lines_counted :]:
                self._data_bytes += len(value) + 1
            self._data_lines_counted = len(data_lines)
        size = len(self._pending) + self._data_bytes
        if size > self._max_event_bytes:
            raise SSEOverflow(
                f"SSE event exceeds max_event_bytes={self._max_event_bytes} "
                f"({size} bytes buffered without an event boundary)"
            )
