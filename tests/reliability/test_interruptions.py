"""Issue 10 §2: SIGINT/SIGTERM at random moments, kill -9 of a worker, the target dying.
After each: the folder is readable, the report builds, the manifest says how the run
ended, and every request the target finished is in the records."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from tests.reliability.conftest import (
    FLOOD_WORKLOAD,
    child_env,
    free_port,
    locust_cmd,
    only_run_dir,
    read_jsonl,
    run,
    start,
    stop_group,
    wait_for,
    zerohop_cmd,
)
from zerohop.core.exit_codes import EXIT_WORKER_FAILED
from zerohop.sim.launcher import start_sim

pytestmark = pytest.mark.integration

RNG = random.Random(int(os.environ.get("ZEROHOP_RELIABILITY_SEED", "10")))


def records_flowing(results: Path, min_lines: int = 5) -> bool:
    lines = 0
    for path in results.rglob("records/*.jsonl"):
        lines += path.read_bytes().count(b"\n")
    return lines >= min_lines


# a worker killed -9 loses what it had not yet shipped to the master: its last ≤ 1 s
# batch, plus the flush of it in flight
UNSHIPPED_S = 2.5


@dataclass(frozen=True)
class KilledWorker:
    pid: int
    at: float  # wall time of the SIGKILL


def client_of(request_id: str) -> str:
    """`<host>-<pid>-<client>-<n>` → `<host>-<pid>-<client>` (one client per user)."""
    return request_id.rsplit("-", 1)[0]


def pid_of(request_id: str) -> int | None:
    parts = request_id.rsplit("-", 3)
    return int(parts[1]) if len(parts) == 4 and parts[1].isdigit() else None


def assert_nothing_missing(run_dir: Path, truth: Path, *, killed: KilledWorker | None = None,
                           truth_cut_at: float | None = None) -> pd.DataFrame:
    """Every request the target finished (ground truth) has exactly one record, whoever
    sent it: a user all of whose records were lost is missing too, not excused. Ok records
    are requests the target really finished. `killed`: that worker, and it alone, may lose
    the requests it finished in its last UNSHIPPED_S. Requests that no user sent (ids not
    `<host>-<pid>-<client>-<n>`, such as a prompt-sizing probe's) are not load."""
    df = pd.read_parquet(run_dir / "requests.parquet")
    assert df.request_id.is_unique
    gt = {str(t["request_id"]): t for t in read_jsonl(truth)}
    recorded = set(df.request_id)

    def unshipped(rid: str, t: dict) -> bool:  # the killed worker's last unsent batch
        done = float(t["last_token_ts"] or t["arrival_ts"] or 0)
        return killed is not None and pid_of(rid) == killed.pid and done > killed.at - UNSHIPPED_S

    load = {rid: t for rid, t in gt.items() if pid_of(rid) is not None}
    assert load, sorted(gt)[:5]
    missing = [rid for rid, t in load.items()
               if t["outcome"] == "ok" and rid not in recorded and not unshipped(rid, t)]
    assert not missing, missing[:5]
    # and every user the target heard from is in the join, whatever its requests' outcomes
    measured_clients = {client_of(rid) for rid in recorded}
    vanished = {client_of(rid) for rid, t in load.items()
                if not unshipped(rid, t)} - measured_clients
    assert not vanished, sorted(vanished)[:5]
    ok = df[df.outcome == "ok"]
    if truth_cut_at is not None:  # a target killed -9 loses its last unflushed 0.5 s
        ok = ok[ok.end_ts < truth_cut_at - 1.0]
    ok_ids = set(ok.request_id)
    assert ok_ids <= set(gt), list(ok_ids - set(gt))[:5]
    return df


def without_stats_tables(log: Path) -> str:
    """A Locust log less the stats table it prints every few seconds: what a hang's
    diagnosis needs (warnings, the faulthandler dump) is otherwise scrolled away."""
    table_line = re.compile(r"^(Type |E2E |TTFT |ITL |TPOT |\s+Aggregated|-+\||-{8}|\s*$)")
    return "\n".join(line for line in log.read_text().splitlines()
                     if not table_line.match(line))


def assert_report_builds(run_dir: Path) -> None:
    res = run(zerohop_cmd("report", str(run_dir)), timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert (run_dir / "report.html").stat().st_size > 1000


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_locust_headless_stopped_by_signal(sig: signal.Signals, tmp_path: Path) -> None:
    wl = tmp_path / "flood.yaml"
    wl.write_text(FLOOD_WORKLOAD.format(max_tokens=64, users=6))
    truth = tmp_path / "truth.jsonl"
    proc = start(locust_cmd(
        "--headless", "-u", "6", "-r", "6", "-t", "60s", "--stop-timeout", "3",
        "--drain-timeout", "3", "--results-dir", str(tmp_path / "r"), "--workload", str(wl),
        "--telemetry", "", "--sim-args", f"--ground-truth {truth} --time-scale 3",
        "ShortQueryFlood"), log=tmp_path / "locust.log",
        env=child_env(PYTHONFAULTHANDLER="1"))
    try:
        assert wait_for(lambda: records_flowing(tmp_path / "r"), 30), \
            (tmp_path / "locust.log").read_text()[-2000:]
        time.sleep(RNG.uniform(0.0, 3.0))
        os.kill(proc.pid, sig)
        try:
            proc.wait(timeout=40)
        except subprocess.TimeoutExpired:  # say where it hangs: faulthandler dumps on SIGABRT
            os.kill(proc.pid, signal.SIGABRT)
            time.sleep(2)
            pytest.fail(f"still running 40 s after {sig.name}; its log without the stats "
                        "tables:\n" + without_stats_tables(tmp_path / "locust.log")[-6000:])
    finally:
        stop_group(proc)
    log = (tmp_path / "locust.log").read_text()
    assert "Traceback" not in log, log[-3000:]
    run_dir = only_run_dir(tmp_path / "r")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "interrupted", manifest
    assert manifest["end_reason"] == sig.name, manifest
    df = assert_nothing_missing(run_dir, truth)
    assert len(df) > 5
    assert_report_builds(run_dir)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_zerohop_run_forwards_signal_and_finishes_the_folder(sig: signal.Signals,
                                                             tmp_path: Path) -> None:
    wl = tmp_path / "flood.yaml"
    wl.write_text(FLOOD_WORKLOAD.format(max_tokens=64, users=4))
    truth = tmp_path / "truth.jsonl"
    proc = start(zerohop_cmd(
        "run", "--duration", "60s", "--workload", str(wl), "--only", "ShortQueryFlood",
        "--users", "4", "--telemetry", "loadgen", "--microbench", "off",
        "--results-dir", str(tmp_path / "r"), "--name", "sig",
        "--sim-args", f"--ground-truth {truth} --time-scale 3"), log=tmp_path / "out.log")
    try:
        assert wait_for(lambda: records_flowing(tmp_path / "r"), 40), \
            (tmp_path / "out.log").read_text()[-2000:]
        time.sleep(RNG.uniform(0.0, 3.0))
        os.kill(proc.pid, sig)
        code = proc.wait(timeout=60)
    finally:
        stop_group(proc)
    out = (tmp_path / "out.log").read_text()
    assert code == 128 + sig.value, out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    run_dir = only_run_dir(tmp_path / "r")
    assert "Traceback" not in (run_dir / "locust.log").read_text()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "interrupted" and manifest["end_reason"] == sig.name, manifest
    assert (run_dir / "report.html").exists()  # built by `zerohop run` itself
    # it says so, with how long the load ran (the summary's window, its rates' divisor)
    window = json.loads((run_dir / "summary.json").read_text())["window"]["duration_s"]
    assert (f"zerohop: interrupted by {sig.name} after {window:.1f} s of the planned 60 s"
            in out), out[-3000:]
    assert_nothing_missing(run_dir, truth)
    # the embedded target went down with the run
    sim_url = manifest["target"]["url"]
    import urllib.request

    with pytest.raises(OSError):
        urllib.request.urlopen(sim_url + "/health", timeout=2)


def test_kill_9_of_one_worker_keeps_the_rest(tmp_path: Path) -> None:
    wl = tmp_path / "flood.yaml"
    wl.write_text(FLOOD_WORKLOAD.format(max_tokens=32, users=6))
    truth = tmp_path / "truth.jsonl"
    port = free_port()
    run_s = 14.0
    common = ["--workload", str(wl), "--telemetry", ""]
    with start_sim(["--seed", "3"], ground_truth=truth) as sim:
        master = start(locust_cmd(
            "--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port),
            "--expect-workers", "2", "--headless", "-u", "6", "-r", "6", "-t", f"{run_s:g}s",
            "--host", sim.url, "--results-dir", str(tmp_path / "r"), *common,
            "ShortQueryFlood"), log=tmp_path / "master.log")
        workers = [start(locust_cmd(
            "--worker", "--master-host", "127.0.0.1", "--master-port", str(port), *common,
            "ShortQueryFlood"), log=tmp_path / f"worker{i}.log") for i in range(2)]
        try:
            assert wait_for(lambda: records_flowing(tmp_path / "r", 20), 40)
            time.sleep(RNG.uniform(1.0, 3.0))
            killed = KilledWorker(workers[0].pid, time.time())
            os.kill(killed.pid, signal.SIGKILL)
            master.wait(timeout=90)
            workers[1].wait(timeout=30)
        finally:
            for p in (master, *workers):
                stop_group(p)
        assert sim.alive()
    log = (tmp_path / "master.log").read_text()
    assert "Traceback" not in log, log[-3000:]
    run_dir = only_run_dir(tmp_path / "r")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert master.returncode == EXIT_WORKER_FAILED, log[-3000:]  # README: exit 5, `partial`
    assert manifest["status"] == "partial", manifest
    df = assert_nothing_missing(run_dir, truth, killed=killed)
    # named as the process its records name (Locust's index follows the connect order)
    killed_process = set(df.worker[df.request_id.map(pid_of) == killed.pid])
    assert [w["worker"] for w in manifest["workers_failed"]] == [*killed_process], manifest
    assert df.worker.nunique() == 2

    # The survivor lost nothing: every request of its that the target saw has its
    # record (no waiver), it has no record the target did not see, and what it calls
    # ok the target finished.
    gt = {str(t["request_id"]): t for t in read_jsonl(truth)}
    survivor = workers[1].pid
    assert {pid_of(rid) for rid in gt} == {killed.pid, survivor}, sorted(gt)[:5]
    mine = df[df.request_id.map(pid_of) == survivor]
    seen = {rid for rid in gt if pid_of(rid) == survivor}
    assert set(mine.request_id) == seen, sorted(seen ^ set(mine.request_id))[:5]
    assert all(gt[rid]["outcome"] == "ok" for rid in mine[mine.outcome == "ok"].request_id)
    # and it kept measuring after the kill, about as many requests as its users could
    # send back to back in the rest of the run (run time from the run's first send;
    # the time per request is the run's own median)
    after = mine[mine.sent_ts > killed.at]
    rest_s = df.sent_ts.min() + run_s - killed.at
    per_request_s = float(mine.e2e_ms.median()) / 1e3
    users = mine.request_id.map(client_of).nunique()
    possible = users * rest_s / per_request_s
    assert possible >= 10, (users, rest_s, per_request_s)  # the kill left room to measure
    assert len(after) >= 0.5 * possible, (len(after), possible)
    assert_report_builds(run_dir)


def test_target_killed_mid_run(tmp_path: Path) -> None:
    wl = tmp_path / "flood.yaml"
    wl.write_text(FLOOD_WORKLOAD.format(max_tokens=32, users=4))
    truth = tmp_path / "truth.jsonl"
    sim = start_sim(["--seed", "4"], ground_truth=truth)
    proc = start(locust_cmd(
        "--headless", "-u", "4", "-r", "4", "-t", "9s", "--stop-timeout", "3",
        "--host", sim.url, "--ttft-timeout", "2",
        "--results-dir", str(tmp_path / "r"), "--workload", str(wl), "--telemetry", "",
        "ShortQueryFlood"), log=tmp_path / "locust.log", env=child_env())
    try:
        assert wait_for(lambda: records_flowing(tmp_path / "r", 10), 30)
        time.sleep(RNG.uniform(0.5, 2.0))
        killed_at = time.time()
        os.killpg(sim.pid, signal.SIGKILL)
        sim.proc.wait(timeout=10)
        proc.wait(timeout=60)
    finally:
        stop_group(proc)
        sim.stop()
    log = (tmp_path / "locust.log").read_text()
    assert "Traceback" not in log, log[-3000:]
    run_dir = only_run_dir(tmp_path / "r")
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "completed"
    df = assert_nothing_missing(run_dir, truth, truth_cut_at=killed_at)
    after = df[df.sent_ts > df[df.outcome == "ok"].end_ts.max()]
    assert len(after) > 0 and set(after.outcome) <= {"connect_error", "cancelled",
                                                     "incomplete_stream"}, \
        df.outcome.value_counts()
    assert_report_builds(run_dir)
