"""Ground truth: what the server really did for each request, for tests to check
client-side measurements against.

One JSON object per finished request (errors and cancellations too), kept in memory
for `GET /zerohop/ground_truth?request_id=...` and appended to a JSONL file when one is
configured (flushed at least every `FLUSH_INTERVAL_S`). Wall-clock fields (`*_ts`) are
seconds since the epoch on one `ClockAnchor` per process: `perf_counter_ns` readings
converted with the same (wall, perf) pair, so differences between them are exact.

Fields: request_id, api, model, adapter, stream, accepted_ts (connection accepted),
arrival_ts (request bytes fully read), first_token_ts / last_token_ts (bytes handed to
the socket), scheduled_first_token_ts (the engine's modelled time of token 1),
prompt_tokens, completion_tokens, outcome (the zerohop outcome taxonomy, as a correct
client should classify it), http_status, error_type, finish_reason, fault,
server_ttft_ms (first_token_ts - arrival_ts), server_e2e_ms, queue_ms, prefill_time_ms
and decode_time_ms (the engine's phases as vLLM's histograms observe them: first
scheduled → token 1 → last token; the time budget's truth), preemptions,
max_emission_lag_ms, emit_lag_ms ({mean, p50, p99, max} or, with token lags enabled,
the list of every token's lag), token_ts (with token lags enabled: every token's write
time, for checking a client's inter-token latencies token by token). A prefill/decode
instance (sim.pd_roles) adds pd_role and, on the prefill leg, prefill_ms; on the decode
leg kv_transfer_ms, kv_bytes, prefill_request_id, prefill_queue_ms, prefill_ms (as the
prefill sent them), decode_queue_ms and first_decode_ms.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import OrderedDict
from pathlib import Path
from typing import IO, Any

from zerohop.core.records import ClockAnchor

FLUSH_INTERVAL_S = 0.5
KEEP_IN_MEMORY = 20_000  # the JSONL file keeps everything


class GroundTruthLog:
    def __init__(self, path: Path | None, anchor: ClockAnchor, keep: int = KEEP_IN_MEMORY) -> None:
        self.path = path
        self.anchor = anchor
        self.keep = keep
        self._records: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._pending: list[str] = []
        self._file: IO[str] | None = None
        self._task: asyncio.Task[None] | None = None
        self.count = 0

    def wall_s(self, perf_ns: int | None) -> float | None:
        return None if perf_ns is None else round(self.anchor.wall_s(perf_ns), 6)

    def add(self, record: dict[str, Any]) -> None:
        request_id = str(record["request_id"])
        self._records[request_id] = record
        self._records.move_to_end(request_id)
        while len(self._records) > self.keep:
            self._records.popitem(last=False)
        self.count += 1
        if self.path is not None:
            self._pending.append(json.dumps(record, separators=(",", ":")))

    def get(self, request_id: str) -> dict[str, Any] | None:
        return self._records.get(request_id)

    def last(self, n: int) -> list[dict[str, Any]]:
        items = list(self._records.values())
        return items[-n:] if n > 0 else []

    def start(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("a", encoding="utf-8")
        self._task = asyncio.get_running_loop().create_task(self._flush_forever())

    def flush(self) -> None:
        if self._file is None or not self._pending:
            return
        lines, self._pending = self._pending, []
        self._file.write("\n".join(lines) + "\n")
        self._file.flush()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.flush()
        if self._file is not None:
            self._file.close()
            self._file = None

    async def _flush_forever(self) -> None:
        while True:
            await asyncio.sleep(FLUSH_INTERVAL_S)
            self.flush()
