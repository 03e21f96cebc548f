"""The distributed path across real network stacks: a master and two workers, each in
its own network namespace, linked by veth pairs, and one worker's link cut mid-run.

On loopback a lost worker is a dead process; here the process lives on and only the
network goes, the way a node or a pod network fails. The master must still name the
worker it lost, mark the run partial (exit 5), and keep every record that reached it:
the lost worker's up to the cut and the surviving worker's to the end.

Needs root and `ip` (network namespaces, veth); skipped, with the reason, elsewhere.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pytest

from zerohop.runner.locust_process import locust_command, write_plan
from zerohop.runner.plan import RunPlan
from zerohop.shipped import loadtests_dir
from zerohop.storage.run_folder import read_record_rows

pytestmark = [pytest.mark.integration, pytest.mark.slow]

EXIT_WORKER_FAILED = 5
RUN_S = 20
MASTER_PORT = 5557
TARGET_ADDRESS = "10.77.0.1"  # on the master namespace's loopback: one URL for all workers
LOST = 0  # the worker whose link is cut: started first, so the master gives it index 0
WORKLOAD = ("kind: short_query_flood\nname: flood\ninput_tokens: 16\nmax_tokens: 8\n"
            "load: {kind: closed, users: 4}\n")
# a record that finished this long before the cut had been shipped (every 1 s) and
# delivered over the veth before the link went
SHIPPED_BEFORE_CUT_S = 2.5


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)


def _network_lab_unavailable() -> str | None:
    """Why network namespaces cannot be made here, or None: probed by making one."""
    if os.geteuid() != 0:
        return "needs root to create network namespaces"
    if shutil.which("ip") is None:
        return "needs iproute2's `ip`"
    probe = f"zhprobe{secrets.token_hex(3)}"
    made = _ip("netns", "add", probe)
    if made.returncode != 0:
        return f"cannot create a network namespace: {made.stderr.strip()}"
    _ip("netns", "del", probe)
    return None


@dataclass
class NetworkLab:
    """A master namespace and one namespace per worker, each worker linked to the master
    by its own veth pair; nothing else reaches them."""

    tag: str
    workers: int
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    namespaces: list[str] = field(default_factory=list)

    @property
    def master_ns(self) -> str:
        return f"zh{self.tag}m"

    def worker_ns(self, i: int) -> str:
        return f"zh{self.tag}w{i}"

    def master_end(self, i: int) -> str:
        """The master namespace's end of worker i's link (interface names ≤ 15 chars)."""
        return f"zh{self.tag}m{i}"

    def worker_end(self, i: int) -> str:
        return f"zh{self.tag}w{i}"

    @staticmethod
    def master_address(i: int) -> str:
        return f"10.77.{i + 1}.1"

    @staticmethod
    def worker_address(i: int) -> str:
        return f"10.77.{i + 1}.2"

    def build(self) -> None:
        self._netns_add(self.master_ns)
        self._run_in(self.master_ns, "link", "set", "lo", "up")
        self._run_in(self.master_ns, "addr", "add", f"{TARGET_ADDRESS}/32", "dev", "lo")
        for i in range(self.workers):
            ns, master_end, worker_end = self.worker_ns(i), self.master_end(i), self.worker_end(i)
            self._netns_add(ns)
            self._run_in(ns, "link", "set", "lo", "up")
            self._check(_ip("link", "add", master_end, "netns", self.master_ns, "type", "veth",
                            "peer", "name", worker_end, "netns", ns))
            self._run_in(self.master_ns, "addr", "add", f"{self.master_address(i)}/30", "dev",
                         master_end)
            self._run_in(self.master_ns, "link", "set", master_end, "up")
            self._run_in(ns, "addr", "add", f"{self.worker_address(i)}/30", "dev", worker_end)
            self._run_in(ns, "link", "set", worker_end, "up")
            self._run_in(ns, "route", "add", f"{TARGET_ADDRESS}/32", "via",
                         self.master_address(i))

    def start(self, ns: str, cmd: list[str], log: Path) -> subprocess.Popen[bytes]:
        with open(log, "wb") as out:
            proc = subprocess.Popen(["ip", "netns", "exec", ns, *cmd], stdout=out,
                                    stderr=subprocess.STDOUT, env=_clean_env())
        self.processes.append(proc)
        return proc

    def cut(self, i: int) -> None:
        """Worker i's link goes down: its process lives on, unreachable."""
        self._run_in(self.master_ns, "link", "set", self.master_end(i), "down")

    def tear_down(self) -> None:
        for proc in self.processes:
            if proc.poll() is None:
                proc.terminate()
        deadline = time.monotonic() + 15
        for proc in self.processes:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        for ns in reversed(self.namespaces):  # the veth pairs go with their namespaces
            _ip("netns", "del", ns)

    def _netns_add(self, ns: str) -> None:
        self._check(_ip("netns", "add", ns))
        self.namespaces.append(ns)

    def _run_in(self, ns: str, *args: str) -> None:
        self._check(_ip("-n", ns, *args))

    @staticmethod
    def _check(res: subprocess.CompletedProcess[str]) -> None:
        if res.returncode != 0:
            pytest.skip(f"cannot build the network lab: {' '.join(res.args)}: "
                        f"{res.stderr.strip()}")


def _clean_env() -> dict[str, str]:
    """No proxy settings: every address here is inside the lab."""
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    return {**env, "PYTHONUNBUFFERED": "1"}


@pytest.fixture()
def lab() -> Iterator[NetworkLab]:
    reason = _network_lab_unavailable()
    if reason:
        pytest.skip(reason)
    net = NetworkLab(tag=secrets.token_hex(3), workers=2)
    try:
        net.build()
        yield net
    finally:
        net.tear_down()


def _wait_for(what: str, ready: Callable[[], bool], timeout_s: float,
              logs: list[Path]) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if ready():
            return
        time.sleep(0.2)
    tails = "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-2000:]}"
                      for p in logs if p.exists())
    pytest.fail(f"timed out waiting for {what}\n{tails}")


def _master_rows_by_worker(run_dir: Path) -> dict[str, int]:
    rows, _bad = read_record_rows(run_dir)
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["worker"]] = counts.get(row["worker"], 0) + 1
    return counts


def _start_target(lab: NetworkLab, tmp_path: Path) -> str:
    port_file = tmp_path / "sim.port"
    log = tmp_path / "sim.log"
    lab.start(lab.master_ns, [sys.executable, "-m", "zerohop", "sim", "--host", TARGET_ADDRESS,
                              "--port", "0", "--port-file", str(port_file)], log)
    _wait_for("the embedded target", port_file.exists, 60, [log])
    return f"http://{TARGET_ADDRESS}:{port_file.read_text().strip()}"


def _master_command(host: str, run_dir: Path, workload: Path, audit: Path) -> list[str]:
    """What `zerohop run` starts (runner.locust_process), as a master of two workers
    that listens on every link."""
    plan = RunPlan(host=host, api="openai-chat", workloads=[workload],
                   classes=["ShortQueryFlood"], users=4, rate=None, duration_s=RUN_S,
                   telemetry="none", slo={}, name="netns", workers=0,
                   results_dir=run_dir.parent, seed=7)
    run_dir.mkdir(parents=True, exist_ok=True)
    write_plan(plan, run_dir)  # the settings the master reads, as `zerohop run` writes them
    return [*locust_command(plan, host, run_dir), "--master", "--master-bind-host", "0.0.0.0",
            "--master-bind-port", str(MASTER_PORT), "--expect-workers", "2",
            "--expect-workers-max-wait", "60", "--loglevel", "INFO",
            "--audit-records-dir", str(audit)]


def _worker_command(master_address: str) -> list[str]:
    return [sys.executable, "-m", "locust", "-f", str(loadtests_dir()), "--worker",
            "--master-host", master_address, "--master-port", str(MASTER_PORT),
            "--loglevel", "INFO"]


@pytest.mark.alone  # timing-sensitive: CI runs it with no test beside it
def test_a_worker_cut_off_mid_run_is_named_and_its_records_kept(lab: NetworkLab,
                                                                tmp_path: Path) -> None:
    workload = tmp_path / "flood.yaml"
    workload.write_text(WORKLOAD)
    run_dir, audit = tmp_path / "results" / "run", tmp_path / "audit"
    host = _start_target(lab, tmp_path)
    master_log = tmp_path / "master.log"
    worker_logs = [tmp_path / f"worker{i}.log" for i in range(2)]
    logs = [master_log, *worker_logs]
    master = lab.start(lab.master_ns, _master_command(host, run_dir, workload, audit),
                       master_log)
    workers = []
    for i in range(2):  # one at a time: the master numbers workers as they connect
        workers.append(lab.start(lab.worker_ns(i), _worker_command(lab.master_address(i)),
                                 worker_logs[i]))
        _wait_for(f"worker {i} to connect", lambda n=i + 1: (
            f"{n} workers connected" in master_log.read_text(errors="replace")), 60, logs)
    # records say which process measured them: `host:pid` (`ip netns exec` execs in place)
    tags = {i: f"{socket.gethostname()}:{w.pid}" for i, w in enumerate(workers)}
    survivor = 1 - LOST

    _wait_for("records from both workers", lambda: all(
        _master_rows_by_worker(run_dir).get(tag, 0) >= 20 for tag in tags.values()), 60, logs)
    time.sleep(2)
    cut_at = time.time()
    lab.cut(LOST)
    code = master.wait(timeout=RUN_S + 90)
    workers[survivor].wait(timeout=60)  # told to quit by the master it still reaches
    workers[LOST].terminate()  # never hears the end: stopped here, its audit flushed
    workers[LOST].wait(timeout=30)

    tails = "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in logs)
    assert code == EXIT_WORKER_FAILED, tails
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "partial", manifest
    (failed,) = manifest["workers_failed"]
    assert failed["worker_index"] == LOST and failed["worker"] == tags[LOST], failed
    assert "stopped answering (no heartbeat)" in failed["reason"], failed
    assert f"worker {LOST} ({tags[LOST]}) stopped answering" in manifest["end_reason"]

    df = pd.read_parquet(run_dir / "requests.parquet")
    assert df.request_id.is_unique
    lost, kept = df[df.worker == tags[LOST]], df[df.worker == tags[survivor]]
    # the lost worker measured until the cut, and nothing of it arrived after
    assert len(lost) >= 20
    assert lost.end_ts.max() < cut_at + 0.5
    # the survivor carried the run to its end, past the master's notice of the loss
    assert (kept.sent_ts > cut_at + 5).sum() >= 20

    audit_rows, bad = read_record_rows(audit)
    assert bad == 0
    measured = pd.DataFrame(audit_rows)
    by_worker = {i: measured[measured.worker == tags[i]] for i in tags}
    # every record the survivor measured reached the master, once
    assert set(kept.request_id) == set(by_worker[survivor].request_id)
    # every record the lost worker shipped before the cut is kept
    shipped = by_worker[LOST][by_worker[LOST].end_ts < cut_at - SHIPPED_BEFORE_CUT_S]
    assert len(shipped) >= 20
    assert set(shipped.request_id) <= set(lost.request_id)
