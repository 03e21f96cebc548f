"""What one Locust process holds for a run, and how records travel to the results folder.

One `ProcessRuntime` per Locust process, kept on the Environment (no module globals).
The master (or the local runner) owns the results folder: its `RecordSink`, the
manifest, telemetry and the embedded target. Workers measure and send their records to
the master in small batches ("zerohop:records"); at the end of a run the master asks
every worker to drain ("zerohop:drain": stop starting requests, let the in-flight ones
finish, send what is left) and waits for each "zerohop:drained" before Locust stops the
users — so nothing in flight is lost and every record reaches the master exactly once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gevent
from gevent.lock import Semaphore

from zerohop.core import records as rec
from zerohop.core.layout import NOT_SENT_DIR
from zerohop.core.records import ClockAnchor, RequestRecord
from zerohop.storage.run_folder import RecordSink

log = logging.getLogger("zerohop")

MSG_RECORDS = "zerohop:records"
MSG_DRAIN = "zerohop:drain"
MSG_DRAINED = "zerohop:drained"
SEND_INTERVAL_S = 1.0
MAX_BATCH_ROWS = 2000


@dataclass
class Counters:
    dropped_arrivals: int = 0
    cancelled: int = 0
    not_sent: int = 0  # arrivals still waiting for a --max-concurrency slot at the end
    sent: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"dropped_arrivals": self.dropped_arrivals, "cancelled": self.cancelled,
                "not_sent": self.not_sent, "sent": self.sent}


@dataclass
class ProcessRuntime:
    role: str  # "local" | "master" | "worker"
    anchor: ClockAnchor = field(default_factory=ClockAnchor.now)
    run_dir: Path | None = None
    sink: RecordSink | None = None
    not_sent: RecordSink | None = None  # arrivals never sent (`keep_rows`), on first use
    audit: RecordSink | None = None  # this process's own copy, when auditing
    counters: Counters = field(default_factory=Counters)
    draining: bool = False
    in_flight: int = 0
    outbox: list[dict[str, Any]] = field(default_factory=list)
    send: Callable[[str, Any], None] | None = None  # worker → master
    sim: Any = None  # the embedded target's process handle, when we started one
    telemetry: Any = None  # the master's / local runner's TelemetryRecorder
    self_telemetry: Any = None  # a worker's own CPU / memory / loop-lag sampler
    live: Any = None  # the web UI tab's LiveLatencies (web_tab.py), when there is one
    extras: dict[str, Any] = field(default_factory=dict)
    _sender: Any = None
    _reactor: Any = None
    _calibration_lock: Semaphore = field(default_factory=Semaphore)

    # --- records -----------------------------------------------------------------
    def emit(self, record: RequestRecord) -> None:
        """Keep one finished record: into this process's sinks (`keep_rows`), or queued
        for the master."""
        row = record.to_row()
        if self.audit is not None:
            self.audit.add(row)
        if self.sink is not None:
            self.keep_rows([row])
        else:
            self.outbox.append(row)
        if record.outcome == rec.NOT_SENT:
            return
        self.counters.sent += 1
        if self.live is not None:
            self.live.add(row)

    def keep_rows(self, rows: list[dict[str, Any]]) -> None:
        """Rows into records/, and an arrival never sent (`not_sent`) into its own
        folder, apart from the requests every figure reads."""
        sink = self.sink
        assert sink is not None, "only a process with a record sink keeps rows"
        for row in rows:
            if row.get("outcome") != rec.NOT_SENT:
                sink.add(row)
                continue
            if self.not_sent is None:  # beside records/, in the same results folder
                self.not_sent = RecordSink(sink.path.parent.parent, "locust-" + self.role,
                                           folder=NOT_SENT_DIR)
            self.not_sent.add(row)

    def close_sinks(self) -> None:
        for sink in (self.sink, self.not_sent):
            if sink is not None:
                sink.close()

    def flush_outbox(self) -> None:
        if self.send is None:
            return
        telemetry = self.self_telemetry.drain() if self.self_telemetry is not None else []
        if telemetry:
            self.send(MSG_RECORDS, {"rows": [], "telemetry": telemetry})
        while self.outbox:
            batch, self.outbox = self.outbox[:MAX_BATCH_ROWS], self.outbox[MAX_BATCH_ROWS:]
            self.send(MSG_RECORDS, {"rows": batch})

    def start_sender(self) -> None:
        """Worker: ship queued records every second; master/local: flush the sink."""
        if self._sender is not None:
            return

        def loop() -> None:
            while True:
                gevent.sleep(SEND_INTERVAL_S)
                self.flush_outbox()
                if self.sink is not None:
                    self.sink.flush()

        self._sender = gevent.spawn(loop)

    def stop_sender(self) -> None:
        if self._sender is not None:
            self._sender.kill(block=True)
            self._sender = None
        self.flush_outbox()
        for sink in (self.sink, self.not_sent, self.audit):
            if sink is not None:
                sink.flush()

    # --- the end-of-run drain ----------------------------------------------------
    def drain(self, timeout_s: float) -> None:
        """Stop starting requests and wait (bounded) for those in flight."""
        self.draining = True
        deadline = time.monotonic() + timeout_s
        while self.in_flight > 0 and time.monotonic() < deadline:
            gevent.sleep(0.05)
        if self.in_flight:
            log.warning("zerohop: %d requests still in flight after the %.0f s drain; "
                        "they are recorded as cancelled", self.in_flight, timeout_s)

    def reactor(self) -> Any:
        """This process's one stream reader (created on first use, after Locust forked)."""
        if self._reactor is None:
            from zerohop.loadgen.reactor import EpollReactor

            self._reactor = EpollReactor()
        return self._reactor

    def calibration_lock(self) -> Semaphore:
        return self._calibration_lock


def runtime_of(environment: Any) -> ProcessRuntime:
    rt = getattr(environment, "zerohop_runtime", None)
    if rt is None:
        raise RuntimeError("zerohop's Locust hooks are not installed in this environment")
    return rt
