"""A Locust worker that fails or leaves before the end makes the run partial, loudly.

Locust's master takes a worker's early exit in its stride: it forgets the worker,
spreads the users over the others and exits 0 with a clean summary, so a run that lost
half its load generators (and every workload one of them held) looked complete. Here
the master remembers the workers it started with, watches them for the whole measured
window, and hears a worker's own last words when it can say them (its test_start
failed: `zerohop:worker_failed`). Each failure is kept with the worker's index, the
`<host>:<pid>` its records carry in `worker` (learnt from its first batch: Locust's
index follows the order workers connect, which no user can see) and the reason; at the
end the manifest says `status: partial` and lists them, the summary
names them, and the exit code is `core.exit_codes.EXIT_WORKER_FAILED`.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

log = logging.getLogger("zerohop")

MSG_WORKER_FAILED = "zerohop:worker_failed"
WATCH_INTERVAL_S = 0.5
_STATE = "worker_health"


def _state(rt: Any) -> dict[str, Any]:
    return rt.extras.setdefault(_STATE, {"expected": {}, "failures": {}, "reasons": {},
                                         "processes": {}, "watcher": None, "started": None})


# --- worker side ----------------------------------------------------------------------
def report_failure(rt: Any, reason: str) -> None:
    """Tell the master why this worker is about to stop (best effort: the message is
    sent, then the hub gets a moment to flush it before the process goes)."""
    import gevent

    if rt.send is None:
        return
    try:
        rt.send(MSG_WORKER_FAILED, {"reason": reason, "pid": os.getpid()})
        gevent.sleep(0.2)
    except Exception as exc:  # the master may already be gone: the watch still sees it
        log.warning("zerohop: could not tell the master this worker failed: %s", exc)


# --- master side ----------------------------------------------------------------------
def register(runner: Any, rt: Any) -> None:
    """Listen for workers' failure reports (call at init, on the master)."""
    state = _state(rt)

    def on_failed(msg: Any, **_: Any) -> None:
        data = msg.data or {}
        reason = str(data.get("reason") or "failed")
        if data.get("pid"):
            reason += f" (pid {data['pid']})"
        state["reasons"][msg.node_id] = reason
        _record(runner, state, msg.node_id, reason)

    runner.register_message(MSG_WORKER_FAILED, on_failed)


def note_process(rt: Any, node_id: str, rows: list[dict[str, Any]]) -> None:
    """Remember which process a worker node is, from the `worker` of its records."""
    processes = _state(rt)["processes"]
    if node_id not in processes and rows and rows[0].get("worker"):
        processes[node_id] = rows[0]["worker"]


def start_watch(runner: Any, rt: Any) -> None:
    """Remember the workers the run starts with and watch them until `stop_watch`."""
    state = _state(rt)
    state["started"] = time.monotonic()
    for node in runner.clients.all:
        state["expected"][node.id] = runner.get_worker_index(node.id)
    if state["watcher"] is None:
        import gevent

        state["watcher"] = gevent.spawn(_watch, runner, state)


def stop_watch(runner: Any, rt: Any, *, last_look: bool = True) -> None:
    """One last look (after the drain, before Locust tells the workers to quit: from
    then on a worker leaving is the normal end). `last_look=False` only stops it."""
    state = _state(rt)
    watcher, state["watcher"] = state["watcher"], None
    if watcher is not None:
        watcher.kill(block=True, timeout=1.0)
    if last_look:
        _check(runner, state)


def failures(rt: Any) -> list[dict[str, Any]]:
    """[{worker_index, worker_id, worker, reason, at_s}, ...] in the order they happened
    (`worker` is None for a worker that failed before it sent a record)."""
    return list(_state(rt)["failures"].values())


def summary_line(failed: list[dict[str, Any]]) -> str:
    """`worker 1 (host:4711) quit before the end of the run; worker 0 …` for end_reason
    and the console."""
    def name(failure: dict[str, Any]) -> str:
        process = failure.get("worker")
        return f"worker {failure['worker_index']}" + (f" ({process})" if process else "")

    return "; ".join(f"{name(f)} {f['reason']}" for f in failed)


def _watch(runner: Any, state: dict[str, Any]) -> None:
    import gevent

    while True:
        _check(runner, state)
        gevent.sleep(WATCH_INTERVAL_S)


def _check(runner: Any, state: dict[str, Any]) -> None:
    for node_id in state["expected"]:
        if node_id in state["failures"]:
            continue
        node = runner.clients.get(node_id)
        if node is None:
            _record(runner, state, node_id,
                    state["reasons"].get(node_id, "quit before the end of the run"))
        elif node.state == "missing":
            _record(runner, state, node_id, state["reasons"].get(
                node_id,
                "stopped answering (no heartbeat): it crashed, was killed or lost its network"))


def _record(runner: Any, state: dict[str, Any], node_id: str, reason: str) -> None:
    if node_id in state["failures"]:
        if node_id in state["reasons"]:  # its own words beat our guess
            state["failures"][node_id]["reason"] = state["reasons"][node_id]
        return
    started = state["started"]
    at_s = None if started is None else round(time.monotonic() - started, 1)
    index = state["expected"].get(node_id)
    if index is None:
        index = runner.get_worker_index(node_id)
    state["failures"][node_id] = {"worker_index": index, "worker_id": node_id,
                                  "worker": state["processes"].get(node_id),
                                  "reason": reason, "at_s": at_s}
    log.error("zerohop: worker %s (%s) %s; the run is partial", index, node_id, reason)
