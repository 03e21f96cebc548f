"""RequestRecord: the one row every measured request becomes, and the outcome taxonomy.

This is the contract between the transports that measure (Locust's gevent users, the
benchmarks), the sink that stores (`storage/run_folder.py`), and the analysis that reads
(`requests.parquet`). Field names and meanings are the user-facing contract.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any

# --- outcome taxonomy -------------------------------------------------------------
OK = "ok"
CONNECT_ERROR = "connect_error"
TIMEOUT_TTFT = "timeout_ttft"
TIMEOUT_TOTAL = "timeout_total"
STALL = "stall"
INCOMPLETE_STREAM = "incomplete_stream"
PROTOCOL_ERROR = "protocol_error"
CANCELLED = "cancelled"

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


# --- the record ---------------------------------------------------------------------
@dataclass
class RequestRecord:
    """One attempt at one request. Durations in ms from perf_counter_ns; `*_ts` are
    wall-clock seconds on the process's ClockAnchor. None means "not applicable"
    (e.g. no TTFT for a connect error, no TPOT for a 1-token answer)."""

    request_id: str
    workload: str
    api: str
    model: str
    outcome: str = CANCELLED
    adapter: str | None = None
    worker: str = ""  # "<host>:<pid>" of the process that measured it
    # intended and actual times (open loop: scheduled_ts is the plan; closed loop: None)
    scheduled_ts: float | None = None
    sent_ts: float | None = None
    first_content_ts: float | None = None
    end_ts: float | None = None
    schedule_lag_ms: float | None = None  # sent − (scheduled + queue_wait_ms)
    # an open loop under --max-concurrency: how long the arrival waited for a slot
    # (0: it found one free); the latencies from schedule include it
    queue_wait_ms: float | None = None
    # latencies
    ttft_ms: float | None = None
    e2e_ms: float | None = None
    tpot_ms: float | None = None
    ttft_from_schedule_ms: float | None = None
    e2e_from_schedule_ms: float | None = None
    itl_ms: list[float] = field(default_factory=list)
    tokens_per_event: list[int] = field(default_factory=list)
    content_events: int = 0
    # tokens
    input_tokens: int | None = None
    output_tokens: int | None = None
    token_source: str | None = None  # "usage" (server-reported) or "counted"
    counted_output_tokens: int | None = None  # the client's own count: events × tokens each
    # how the prompt was sized: tokenize (the target's /tokenize), tokenizer (a local
    # tokenizer.json, --tokenizer), usage (calibrated on its usage counts), estimate (its
    # counts were unusable), token_ids (exact)
    prompt_token_source: str | None = None
    target_input_tokens: int | None = None
    # target_input_tokens was a size the target's tokenizer cannot make (below the
    # smallest request, framing and one word, or between two it can): the nearest was sent
    prompt_clamped: bool | None = None
    max_tokens: int | None = None
    # errors
    http_status: int | None = None
    error_type: str | None = None
    error_message: str | None = None  # truncated, server-provided: escape when shown
    # retries / fallbacks (one logical request may have several attempts)
    logical_request_id: str | None = None
    attempt: int = 1
    # ground truth from the embedded target, when it tells (server-side TTFT etc.)
    server_ttft_ms: float | None = None
    # the response's W3C Server-Timing header as sent (a layer's or gateway's own cost)
    server_timing: str | None = None
    # client policy (policy.py): the attempt's own facts, then the logical request's,
    # which are set on its final attempt only (final_outcome is None on the others)
    retry_after_s: float | None = None  # the response's Retry-After header, in seconds
    attempt_reason: str | None = None  # first | retry | fallback | continuation
    backoff_ms: float | None = None  # waited before this attempt
    final_outcome: str | None = None  # the logical request's outcome
    logical_e2e_ms: float | None = None  # first send → last end, waits included
    logical_ttft_ms: float | None = None  # first send → first content of the answer
    logical_attempts: int | None = None  # attempts the logical request made
    answered_by: str | None = None  # the model that answered (None: none did)
    give_up_reason: str | None = None  # why it stopped without an answer
    # conversations and agent loops: which session, which turn, which step of the loop
    session_id: str | None = None
    turn: int | None = None  # 1 for a session's first request
    agent_step: int | None = None  # 1 for an agent loop's first model call
    agent_end: str | None = None  # on a loop's last call: AGENT_ANSWERED or AGENT_CAPPED
    tool_calls: int | None = None  # tool calls the response asked for
    # the prefix cache: prompt tokens the server answered from its cache
    # (usage.prompt_tokens_details.cached_tokens, Anthropic's cache_read_input_tokens)
    cached_tokens: int | None = None
    # reasoning models: ttft_ms counts reasoning as content; ttfo_ms is the first answer
    # token after it (= ttft_ms when no reasoning came first; None when no answer came)
    ttfo_ms: float | None = None
    reasoning_tokens: int | None = None
    # structured output (a workload's `response_format`): what the answer of an ok
    # request was against the schema: STRUCTURED_VALID, STRUCTURED_INVALID_JSON or
    # STRUCTURED_SCHEMA_MISMATCH; None when no schema was asked for or no answer came
    structured_output: str | None = None
    # an interleaved comparison (`zerohop run --compare-layer`): the arm the request was
    # assigned to (`direct`, `layer`, a routing policy's name); None outside one
    arm: str | None = None
    # the replica that answered, as it named itself (the embedded target's
    # `x-zerohop-replica` header: its HOST:PORT); None when the server does not say
    replica: str | None = None

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


RECORD_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(RequestRecord))

ERROR_MESSAGE_MAX_CHARS = 500
# the response header in which a replica names itself (the embedded target sends it)
REPLICA_HEADER = "x-zerohop-replica"


def truncate_message(message: str | None) -> str | None:
    if message is None:
        return None
    if len(message) <= ERROR_MESSAGE_MAX_CHARS:
        return message
    return message[:ERROR_MESSAGE_MAX_CHARS] + "…"
