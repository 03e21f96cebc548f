"""RequestRecord: the one row every measured request becomes, and the outcome taxonomy.

This is the contract between the transports that measure (Locust's gevent users, the
benchmarks, the virtual clock), the sink that stores (`storage/run_folder.py`), and the
analysis that reads (`requests.parquet`). Field names and meanings are the user-facing
contract. Each field carries its schema entry (`column`/`entry`: meaning, unit, how the
analysis reads it; its type from the annotation): `RECORD_COLUMNS`, from which the
Parquet schema and the analysis' column lists are derived, is the one copy.
"""

from __future__ import annotations

import dataclasses
import time
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Literal

# --- outcome taxonomy -------------------------------------------------------------
OK = "ok"
CONNECT_ERROR = "connect_error"
TIMEOUT_TTFT = "timeout_ttft"
TIMEOUT_TOTAL = "timeout_total"
STALL = "stall"
INCOMPLETE_STREAM = "incomplete_stream"
PROTOCOL_ERROR = "protocol_error"
CANCELLED = "cancelled"
# an open-loop arrival that waited for a --max-concurrency slot until the run ended:
# offered, never sent (not a request to the target: no figure but the offered rate)
NOT_SENT = "not_sent"

# how an agent loop ended, on the record of its last model call (`agent_end`); a loop
# whose last call failed, or that the end of the run cut short, has neither
AGENT_ANSWERED = "answer"  # the model answered without calling a tool
AGENT_CAPPED = "cap"  # the model still called a tool at the loop's `max_steps`
# a structured-output answer (`structured_output`): it parsed and followed the schema,
# it was not JSON at all, or it parsed and broke the schema
STRUCTURED_VALID = "valid"
STRUCTURED_INVALID_JSON = "invalid_json"
STRUCTURED_SCHEMA_MISMATCH = "schema_mismatch"


def http_outcome(status: int) -> str:
    """`http_<code>` for a non-2xx response (e.g. http_429)."""
    return f"http_{int(status)}"


def agent_loop_end(*, ok: bool, tool_calls: int, step: int, max_steps: int) -> str | None:
    """How a loop ends after model call `step` (1, 2, ...): AGENT_ANSWERED when the call
    succeeded without asking for a tool, AGENT_CAPPED when it asked for one at the step
    cap; None when the loop goes on (or the call failed: its outcome says how)."""
    if not ok:
        return None
    if tool_calls == 0:
        return AGENT_ANSWERED
    return AGENT_CAPPED if step >= max_steps else None


def stream_error_outcome(error_type: str | None) -> str:
    """`stream_error:<type>` for an error event inside an HTTP-200 stream."""
    kind = (error_type or "unknown").strip() or "unknown"
    return f"stream_error:{kind}"


# --- the clock anchor ---------------------------------------------------------------
@dataclass(frozen=True)
class ClockAnchor:
    """One (wall, perf) pair per process: durations come from perf_counter_ns, and
    wall-clock timestamps (to align with telemetry) are anchor + perf offset."""

    wall_ns: int
    perf_ns: int

    @classmethod
    def now(cls) -> ClockAnchor:
        perf = time.perf_counter_ns()
        wall = time.time_ns()
        return cls(wall_ns=wall, perf_ns=perf)

    def wall_s(self, perf_ns: int) -> float:
        """Wall-clock seconds (Unix epoch) of a perf_counter_ns reading."""
        return (self.wall_ns + (perf_ns - self.perf_ns)) / 1e9


# --- the record's schema -----------------------------------------------------------
# How the analysis reads a column (`analysis/run_data.py`); None: it does not read it.
Read = Literal["category", "number", "text"]
CATEGORY: Read = "category"  # a grouping key, dictionary-coded
NUMBER: Read = "number"  # a float (NaN when missing), whatever type the record stores
TEXT: Read = "text"  # plain strings, read only for the few rows that show them
# The types a record field may have; storage maps each to one Parquet type.
KINDS: tuple[str, ...] = ("str", "float", "int", "bool", "list[float]", "list[int]")


def entry(doc: str, *, unit: str = "", read: Read | None = None) -> dict[str, Any]:
    """A record field's schema entry (its `dataclasses.field` metadata): what it means,
    its unit, how the analysis reads it. Its type and whether it may be None come from
    the field's annotation."""
    return {"doc": doc, "unit": unit, "read": read}


def column(doc: str, *, unit: str = "", read: Read | None = None, default: Any = None,
           ) -> Any:
    """A scalar record field with its schema entry (`entry`)."""
    return field(default=default, metadata=entry(doc, unit=unit, read=read))


@dataclass(frozen=True)
class RecordColumn:
    """One field of the record as the results folder stores it and the analysis reads it."""

    name: str
    kind: str  # one of KINDS
    nullable: bool
    unit: str
    read: Read | None
    doc: str


# --- the record ---------------------------------------------------------------------
@dataclass
class RequestRecord:
    """One attempt at one request. Durations in ms from perf_counter_ns; `*_ts` are
    wall-clock seconds on the process's ClockAnchor. None means "not applicable"
    (e.g. no TTFT for a connect error, no TPOT for a 1-token answer). Each field's
    schema entry (`column`) is the one the Parquet file and the analysis derive from."""

    request_id: str = column("this attempt's id", default=dataclasses.MISSING)
    workload: str = column("the workload's name", read=CATEGORY, default=dataclasses.MISSING)
    api: str = column("the API the request spoke (core/apis.py)", default=dataclasses.MISSING)
    model: str = column("the model asked for", read=CATEGORY, default=dataclasses.MISSING)
    outcome: str = column("ok, or what went wrong first (the taxonomy above)",
                          read=CATEGORY, default=CANCELLED)
    adapter: str | None = column("the LoRA adapter asked for", read=CATEGORY)
    worker: str = column('"<host>:<pid>" of the process that measured it', default="")
    # intended and actual times (open loop: scheduled_ts is the plan; closed loop: None)
    scheduled_ts: float | None = column("the open loop's intended send", unit="s", read=NUMBER)
    sent_ts: float | None = column("the actual send", unit="s", read=NUMBER)
    first_content_ts: float | None = column("the first content read", unit="s", read=NUMBER)
    end_ts: float | None = column("the end of the exchange", unit="s", read=NUMBER)
    schedule_lag_ms: float | None = column("sent − (scheduled + queue_wait_ms)", unit="ms",
                                           read=NUMBER)
    queue_wait_ms: float | None = column(
        "an open loop under --max-concurrency: how long the arrival waited for a slot "
        "(0: it found one free); the latencies from schedule include it",
        unit="ms", read=NUMBER)
    # latencies (core/timing.py has their formulas)
    ttft_ms: float | None = column("send → first content", unit="ms", read=NUMBER)
    e2e_ms: float | None = column("send → the stream's terminator", unit="ms", read=NUMBER)
    tpot_ms: float | None = column("(e2e − ttft) ÷ (output tokens − 1)", unit="ms",
                                   read=NUMBER)
    ttft_from_schedule_ms: float | None = column("scheduled send → first content", unit="ms",
                                                 read=NUMBER)
    e2e_from_schedule_ms: float | None = column("scheduled send → the end", unit="ms",
                                                read=NUMBER)
    itl_ms: list[float] = field(default_factory=list, metadata=entry(
        "gaps between successive content reads", unit="ms"))
    tokens_per_event: list[int] = field(default_factory=list, metadata=entry(
        "tokens each content event carried", unit="tokens"))
    content_events: int = column("content events in the stream", unit="events", default=0)
    # tokens
    input_tokens: int | None = column("prompt tokens (usage, else none)", unit="tokens",
                                      read=NUMBER)
    output_tokens: int | None = column("answer tokens (usage, else counted)", unit="tokens",
                                       read=NUMBER)
    token_source: str | None = column('"usage" (server-reported) or "counted"',
                                      read=CATEGORY)
    counted_output_tokens: int | None = column(
        "the client's own count: events × tokens each", unit="tokens", read=NUMBER)
    prompt_token_source: str | None = column(
        "how the prompt was sized: tokenize (the target's /tokenize), tokenizer (a local "
        "tokenizer.json, --tokenizer), usage (calibrated on its usage counts), estimate "
        "(its counts were unusable), token_ids (exact)", read=CATEGORY)
    target_input_tokens: int | None = column("the prompt size the plan asked for",
                                             unit="tokens", read=NUMBER)
    images: int | None = column("images the request carried (a workload's `images`)",
                                unit="images", read=NUMBER)
    image_tokens: int | None = column(
        "the prompt tokens its images were asked to cost (the workload's tokens-per-image "
        "rule, core/images.py), beside target_input_tokens for its text", unit="tokens",
        read=NUMBER)
    prompt_clamped: bool | None = column(
        "target_input_tokens was a size the target's tokenizer cannot make (below the "
        "smallest request, framing and one word, or between two it can): the nearest was "
        "sent", read=NUMBER)
    max_tokens: int | None = column("the answer's token limit sent", unit="tokens")
    # errors
    http_status: int | None = column("the response's HTTP status", read=NUMBER)
    error_type: str | None = column("the error's type, as the server named it", read=TEXT)
    error_message: str | None = column("truncated, server-provided: escape when shown",
                                       read=TEXT)
    # retries / fallbacks (one logical request may have several attempts)
    logical_request_id: str | None = column("the logical request this attempt is part of")
    attempt: int = column("1 for a logical request's first attempt", read=NUMBER, default=1)
    # ground truth from the embedded target, when it tells (server-side TTFT etc.)
    server_ttft_ms: float | None = column("the server's own TTFT", unit="ms", read=NUMBER)
    server_timing: str | None = column(
        "the response's W3C Server-Timing header as sent (a layer's or gateway's own cost)",
        read=TEXT)
    # client policy (policy.py): the attempt's own facts, then the logical request's,
    # which are set on its final attempt only (final_outcome is None on the others)
    retry_after_s: float | None = column("the response's Retry-After header", unit="s",
                                         read=NUMBER)
    attempt_reason: str | None = column("first | retry | fallback | continuation",
                                        read=CATEGORY)
    backoff_ms: float | None = column("waited before this attempt", unit="ms", read=NUMBER)
    final_outcome: str | None = column("the logical request's outcome", read=CATEGORY)
    logical_e2e_ms: float | None = column("first send → last end, waits included",
                                          unit="ms", read=NUMBER)
    logical_ttft_ms: float | None = column("first send → first content of the answer",
                                           unit="ms", read=NUMBER)
    logical_attempts: int | None = column("attempts the logical request made")
    answered_by: str | None = column("the model that answered (None: none did)",
                                     read=CATEGORY)
    give_up_reason: str | None = column("why it stopped without an answer", read=CATEGORY)
    # conversations and agent loops: which session, which turn, which step of the loop
    session_id: str | None = column("the conversation or agent loop", read=TEXT)
    turn: int | None = column("1 for a session's first request", read=NUMBER)
    agent_step: int | None = column("1 for an agent loop's first model call", read=NUMBER)
    agent_end: str | None = column("on a loop's last call: AGENT_ANSWERED or AGENT_CAPPED",
                                   read=CATEGORY)
    tool_calls: int | None = column("tool calls the response asked for", unit="calls",
                                    read=NUMBER)
    cached_tokens: int | None = column(
        "prompt tokens the server answered from its prefix cache "
        "(usage.prompt_tokens_details.cached_tokens, Anthropic's cache_read_input_tokens)",
        unit="tokens", read=NUMBER)
    # reasoning models: ttft_ms counts reasoning as content
    ttfo_ms: float | None = column(
        "send → the first answer token after any reasoning (= ttft_ms when no reasoning "
        "came first; None when no answer came)", unit="ms", read=NUMBER)
    reasoning_tokens: int | None = column("output tokens spent thinking", unit="tokens",
                                          read=NUMBER)
    structured_output: str | None = column(
        "a workload's `response_format`: what the answer of an ok request was against the "
        "schema: STRUCTURED_VALID, STRUCTURED_INVALID_JSON or STRUCTURED_SCHEMA_MISMATCH; "
        "None when no schema was asked for or no answer came", read=CATEGORY)
    arm: str | None = column(
        "an interleaved comparison (`zerohop run --compare-layer`): the arm the request "
        "was assigned to (`direct`, `layer`, a routing policy's name)", read=CATEGORY)
    items: int | None = column(
        "a pooling request (embedding, rerank): the texts it carried, inputs embedded or "
        "documents ranked (its batch size); None for a generation request",
        unit="items", read=NUMBER)
    replica: str | None = column(
        "the replica that answered, as it named itself (the embedded target's "
        "`x-zerohop-replica` header: its HOST:PORT); None when the server does not say",
        read=CATEGORY)

    def to_row(self) -> dict[str, Any]:
        """Plain-Python dict (msgpack- and JSON-safe: no numpy scalars), its lists
        copied. Not `dataclasses.asdict`: its deep copy of every field was the largest
        cost of keeping a record (tests/bench/bench_open_loop_sender.py)."""
        row = {name: getattr(self, name) for name in RECORD_FIELDS}
        row["itl_ms"] = list(self.itl_ms)
        row["tokens_per_event"] = list(self.tokens_per_event)
        return row

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> RequestRecord:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in row.items() if k in names})


def record_columns(record_class: type[RequestRecord] = RequestRecord,
                   ) -> tuple[RecordColumn, ...]:
    """The schema of `record_class`, in field order: each field's type and nullability
    from its annotation, the rest from its `column` entry. A field declared without
    one, or of a type the results folder cannot store, is an error here, at import."""
    hints = typing.get_type_hints(record_class)
    out = []
    for f in dataclasses.fields(record_class):
        if "doc" not in f.metadata:
            raise TypeError(f"{record_class.__name__}.{f.name} has no schema entry: declare "
                            "it with records.column(...) or field(metadata=records.entry(...))")
        kind, nullable = _kind_of(hints[f.name])
        if kind not in KINDS:
            raise TypeError(f"{record_class.__name__}.{f.name}: type {kind} is not one of "
                            f"{', '.join(KINDS)}")
        out.append(RecordColumn(f.name, kind, nullable, f.metadata["unit"],
                                f.metadata["read"], f.metadata["doc"]))
    return tuple(out)


def _kind_of(hint: Any) -> tuple[str, bool]:
    """`float | None` → ("float", True); `list[int]` → ("list[int]", False)."""
    args = typing.get_args(hint)
    nullable = isinstance(hint, types.UnionType) and type(None) in args
    if nullable:
        rest = [a for a in args if a is not type(None)]
        hint = rest[0] if len(rest) == 1 else hint
    if typing.get_origin(hint) is list:
        (item,) = typing.get_args(hint)
        return f"list[{getattr(item, '__name__', item)}]", nullable
    return getattr(hint, "__name__", str(hint)), nullable


RECORD_COLUMNS: tuple[RecordColumn, ...] = record_columns()
RECORD_FIELDS: tuple[str, ...] = tuple(c.name for c in RECORD_COLUMNS)

ERROR_MESSAGE_MAX_CHARS = 500
# the response header in which a replica names itself (the embedded target sends it)
REPLICA_HEADER = "x-zerohop-replica"


def truncate_message(message: str | None) -> str | None:
    if message is None:
        return None
    if len(message) <= ERROR_MESSAGE_MAX_CHARS:
        return message
    return message[:ERROR_MESSAGE_MAX_CHARS] + "…"
