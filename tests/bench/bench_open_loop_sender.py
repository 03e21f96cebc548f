"""Benchmark: how fast one Locust process sends open-loop requests, and what each costs.

A canned-stream server (canned_stream_server.py: the same pre-encoded 2-token chat
stream for every request, a few µs of CPU each) runs pinned to the last core, so the
target is not the limit; its own CPU share over the run is printed as its headroom.
For each process count and rate per process, `zerohop run` drives a short-query
workload (open loop, Poisson, 2 output tokens; the total rate is the rate per process ×
processes, so 1 and 2 processes are compared at the same load per process) through real
Locust, pinned to the other cores, and the script prints over the measured window
(after a warm-up):

* achieved req/s (requests sent in the window ÷ window) and the outcomes that were not
  `ok` (a client that falls behind leaves arrivals unsent, cancelled at the end);
* schedule lag (send time − scheduled time) p50/p99, from the records;
* CPU µs per request: the Locust processes' own CPU time over the window (psutil)
  ÷ requests sent in the window — the primary figure, as it holds when processes share
  cores; with 2 processes the workers' sum is used (the master, which only aggregates,
  is printed on its own).

Goal (issue 20): one process sustains ≥ 3,000 req/s (CPU per request ≤ ~300 µs leaves
that with headroom) with schedule lag p99 < 5 ms at 80 % of that rate; with 2 processes
CPU per request within 10 % of 1 process.

    python tests/bench/bench_open_loop_sender.py --rates 1000,2400,3000 --processes 1,2

A process that gets less than a whole core (other work on the machine) falls behind at
rates it would sustain alone: lag figures need a quiet machine; CPU per request holds.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import canned_stream_server
import numpy as np
import pandas as pd
import psutil

WORKLOAD = """\
kind: short_query_flood
name: sender
input_tokens: 16
max_tokens: 2
ignore_eos: true
load: {{kind: open, rate_rps: {rate}, arrival: poisson, max_in_flight: 100000}}
"""


def locust_processes(root: psutil.Process) -> list[psutil.Process]:
    return [p for p in root.children(recursive=True)
            if any("locust" in part for part in p.cmdline()[:3])]


def cpu_seconds(procs: list[psutil.Process]) -> dict[int, float]:
    out = {}
    for proc in procs:
        try:
            t = proc.cpu_times()
            out[proc.pid] = t.user + t.system
        except psutil.Error:
            pass
    return out


def run_point(host: str, rate: float, processes: int, duration_s: int, warmup_s: int,
              client_cpus: set[int] | None, server: psutil.Process, workdir: Path) -> dict:
    workload = workdir / f"sender-{processes}p-{int(rate)}.yaml"
    workload.write_text(WORKLOAD.format(rate=rate * processes))
    results = workdir / "results"
    cmd = [sys.executable, "-m", "zerohop", "run", "--host", host, "--workload", str(workload),
           "--duration", f"{duration_s}s", "--telemetry", "none", "--no-report",
           "--results-dir", str(results), "--name", workload.stem,
           "--workers", "0" if processes == 1 else str(processes)]
    preexec = (lambda: os.sched_setaffinity(0, client_cpus)) if client_cpus else None
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=preexec)
    root = psutil.Process(proc.pid)
    marks: dict[str, tuple[float, dict[int, float], dict[int, str], float]] = {}

    def sample() -> None:
        # the window starts warmup_s after the first Locust process exists
        while proc.poll() is None and not locust_processes(root):
            time.sleep(0.05)
        t_start = time.time()
        for name, at in (("start", warmup_s), ("end", warmup_s + window_s)):
            time.sleep(max(0.0, t_start + at - time.time()))
            procs = locust_processes(root)
            pids = {p.pid for p in procs}
            # `--processes N` forks the workers from the master: a worker's parent is Locust
            roles = {p.pid: ("worker" if p.ppid() in pids else "main") for p in procs}
            st = server.cpu_times()
            marks[name] = (time.time(), cpu_seconds(procs), roles, st.user + st.system)

    window_s = duration_s - warmup_s - 2
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, _ = proc.communicate()
    sampler.join(timeout=5)
    run_dir = sorted(results.glob(f"*{workload.stem}*"))[-1]
    frame = pd.read_parquet(run_dir / "requests.parquet",
                            columns=["sent_ts", "schedule_lag_ms", "outcome"])
    if "start" not in marks or "end" not in marks:
        raise SystemExit(f"the run ended before its window: {out[-2000:]}")
    (t0, cpu0, roles, s0), (t1, cpu1, _, s1) = marks["start"], marks["end"]
    sent = frame[(frame.sent_ts >= t0) & (frame.sent_ts < t1)]
    lag = sent.schedule_lag_ms.dropna().to_numpy()
    workers = [pid for pid, role in roles.items() if role == "worker"] or list(roles)
    cpu = sum(cpu1.get(pid, 0.0) - cpu0.get(pid, 0.0) for pid in workers)
    master = [pid for pid in roles if pid not in workers]
    master_cpu = sum(cpu1.get(pid, 0.0) - cpu0.get(pid, 0.0) for pid in master)
    n = len(sent)
    not_ok = frame.outcome[frame.outcome != "ok"].value_counts().to_dict()
    return {
        "processes": processes, "rate": rate * processes, "req_s": n / (t1 - t0),
        "lag_p50": float(np.percentile(lag, 50)) if len(lag) else float("nan"),
        "lag_p99": float(np.percentile(lag, 99)) if len(lag) else float("nan"),
        "cpu_us": cpu / n * 1e6 if n else float("nan"),
        "cpu_pct": 100 * cpu / (t1 - t0) / max(1, len(workers)),
        "master_cpu_pct": 100 * master_cpu / (t1 - t0),
        "server_cpu_pct": 100 * (s1 - s0) / (t1 - t0),
        "not_ok": not_ok or "none",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="1000,2400,3000", help="req/s per process")
    parser.add_argument("--processes", default="1,2")
    parser.add_argument("--duration", type=int, default=20, help="seconds per point")
    parser.add_argument("--warmup", type=int, default=6)
    parser.add_argument("--keep", action="store_true", help="keep the runs' folders")
    args = parser.parse_args()
    ncpu = os.cpu_count() or 1
    server_cpu = ncpu - 1 if ncpu > 1 else None
    client_cpus = set(range(ncpu - 1)) if ncpu > 1 else None
    print(f"cores {ncpu}: server on core {server_cpu}, clients on {sorted(client_cpus or [])}")
    server_proc, host = canned_stream_server.start(server_cpu)
    server = psutil.Process(server_proc.pid)
    rows = []
    tmp = tempfile.mkdtemp(prefix="zh-sender-")
    print(f"runs in {tmp}" + ("" if args.keep else " (removed at the end; --keep keeps them)"))
    try:
        for processes in [int(p) for p in args.processes.split(",")]:
            for rate in [float(r) for r in args.rates.split(",")]:
                row = run_point(host, rate, processes, args.duration, args.warmup,
                                client_cpus, server, Path(tmp))
                rows.append(row)
                print(f"{processes} proc  offered {row['rate']:7.0f}/s  sent {row['req_s']:7.0f}/s"
                      f"  lag p50 {row['lag_p50']:7.2f} ms  p99 {row['lag_p99']:8.2f} ms"
                      f"  CPU {row['cpu_us']:6.0f} µs/req ({row['cpu_pct']:3.0f} %/proc,"
                      f" master {row['master_cpu_pct']:3.0f} %)"
                      f"  server CPU {row['server_cpu_pct']:3.0f} %  not ok: {row['not_ok']}",
                      flush=True)
    finally:
        server_proc.kill()
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    one = [r["cpu_us"] for r in rows if r["processes"] == 1]
    two = [r["cpu_us"] for r in rows if r["processes"] == 2]
    if one and two:
        print(f"CPU per request, median over rates: 1 process {np.median(one):.0f} µs,"
              f" 2 processes {np.median(two):.0f} µs (ratio {np.median(two)/np.median(one):.2f})")
    kept_up = [r["rate"] for r in rows if r["processes"] == 1 and r["req_s"] >= 0.98 * r["rate"]]
    if kept_up:
        print(f"1 process kept up with {max(kept_up):.0f} req/s offered (sent ≥ 98 %)")

if __name__ == "__main__":
    main()
