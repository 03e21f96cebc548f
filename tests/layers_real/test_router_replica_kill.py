"""A replica killed (SIGKILL) mid-run and restarted behind vllm-router: what the client
saw — errors by type, time to recover — beside what the router reports on /metrics.

Two routers over the same two replicas are arms of one run: one retries (its default,
up to 5 attempts with backoff), one does not (`--disable-retries`); both open a circuit
breaker after failures and probe again after 3 s (`--cb-timeout-duration-secs 3`).
The direct arm goes to the replica that stays up. Retry or fall back, measured."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from tests.real_layers import read_prometheus, start_vllm_router

FLOOD = ("kind: short_query_flood\nname: flood\ninput_tokens: 32\nmax_tokens: 4\n"
         "load: {kind: closed, users: 4}\n")
BREAKER = ["--cb-timeout-duration-secs", "3"]
KILL_AFTER_REQUESTS = 30  # through the retrying router, by its own count
DOWN_S = 3.0


def test_replica_killed_and_restarted_behind_vllm_router(
        tmp_path: Path, vllm_router_bin: str, replicas: list[str]) -> None:
    from zerohop.sim.embedded import start_embedded_target

    wl = tmp_path / "flood.yaml"
    wl.write_text(FLOOD)
    victim_port = int(replicas[1].rsplit(":", 1)[1])
    victim_pid = _pid_listening(victim_port)
    restarted = None
    with start_vllm_router(replicas, "round_robin", tmp_path, BREAKER, name="retries") as a, \
            start_vllm_router(replicas, "round_robin", tmp_path,
                              [*BREAKER, "--disable-retries"], name="no-retries") as b:
        run = subprocess.Popen(
            [sys.executable, "-m", "zerohop", "run", "--host", replicas[0], "--compare-layer",
             "--layer-url", f"retries={a.url}", "--layer-url", f"no-retries={b.url}",
             "--workload", str(wl), "--only", "ShortQueryFlood", "--duration", "30s",
             "--results-dir", str(tmp_path), "--name", "kill", "--no-report"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            _wait_for_requests(a.metrics_url or "", KILL_AFTER_REQUESTS, run)
            t_kill = time.time()
            os.kill(victim_pid, signal.SIGKILL)
            time.sleep(DOWN_S)
            restarted = start_embedded_target(port=victim_port)
            t_back = time.time()
            out, _ = run.communicate(timeout=240)
        finally:
            if run.poll() is None:
                run.kill()
                run.wait(timeout=10)
            metrics = {"retries": read_prometheus(a.metrics_url or ""),
                       "no-retries": read_prometheus(b.metrics_url or "")}
            if restarted is not None:
                restarted.stop()
    assert run.returncode in (0, 1), out[-3000:]  # 1: the run saw errors, as it should
    records = pd.read_parquet(next(tmp_path.glob("*/requests.parquet")))
    seen = {arm: _what_the_client_saw(records[records.arm == arm], replicas[1], t_kill, t_back)
            for arm in ("direct", "retries", "no-retries")}
    print(json.dumps({"client": seen, "router": {k: _counters(v) for k, v in metrics.items()}},
                     indent=1))
    assert seen["direct"]["errors"] == {}  # the replica that stayed up
    assert seen["no-retries"]["errors"], seen  # without retries the kill reaches the client
    assert sum(seen["retries"]["errors"].values()) < sum(seen["no-retries"]["errors"].values())
    for arm in ("retries", "no-retries"):  # both came back to the restarted replica
        assert seen[arm]["recovered_s"] is not None, seen
    assert _counters(metrics["retries"])["retries"] > 0
    assert _counters(metrics["no-retries"])["retries"] == 0
    for name in ("retries", "no-retries"):
        assert _counters(metrics[name])["breaker_opened"] >= 1, metrics[name]


def _what_the_client_saw(frame: pd.DataFrame, victim: str, t_kill: float,
                         t_back: float) -> dict:
    """Errors by outcome and type; seconds from the restart to the first answer the
    restarted replica gave (None: it never answered again within the run)."""
    bad = frame[frame.outcome != "ok"]
    errors = bad.groupby(["outcome", "error_type"], dropna=False, observed=True).size()
    name = victim.split("://", 1)[1]
    back = frame[(frame.replica == name) & (frame.sent_ts > t_back) & (frame.outcome == "ok")]
    return {"requests": len(frame),
            "errors": {f"{o}/{t}": int(n) for (o, t), n in errors.items()},
            "first_error_after_kill_s": round(float(bad.sent_ts.min() - t_kill), 3)
            if len(bad) else None,
            "recovered_s": round(float(back.sent_ts.min() - t_back), 3) if len(back) else None}


def _counters(values: dict[str, float]) -> dict[str, float]:
    def total(prefix: str, having: str = "") -> float:
        return sum(v for k, v in values.items() if k.startswith(prefix) and having in k)
    return {"retries": total("vllm_router_retries_total"),
            "breaker_opened": total("vllm_router_cb_state_transitions_total", 'to="open"'),
            "breaker_closed_again": total("vllm_router_cb_state_transitions_total",
                                          'to="closed"'),
            "failures": total("vllm_router_cb_outcomes_total", 'outcome="failure"')}


def _wait_for_requests(metrics_url: str, count: int, run: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and run.poll() is None:
        done = sum(v for k, v in read_prometheus(metrics_url).items()
                   if k.startswith("vllm_router_processed_requests_total"))
        if done >= count:
            return
        time.sleep(0.2)
    raise AssertionError(f"the router never counted {count} requests")


def _pid_listening(port: int) -> int:
    """The pid of the process listening on loopback `port` (the replica to kill)."""
    import psutil

    for conn in psutil.net_connections(kind="tcp"):
        if (conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN
                and conn.pid is not None):
            return int(conn.pid)
    raise AssertionError(f"no process listens on port {port}")
