"""A client self-check: drive the embedded target at the intended load, with ground
truth on, and certify the load generator's own error on this machine (see
`analysis.client_certificate` for the bounds, docs/selfcheck.md for the method).

The target runs on one CPU and Locust on the others where the machine has two or more,
as a remote target would leave the client its cores; the folder the check leaves is an
ordinary results folder plus the target's ground truth and selfcheck.json.
"""

from __future__ import annotations

import contextlib
import math
import os
import platform
import socket
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from zerohop.analysis.client.client_certificate import (
    Bounds,
    Figures,
    LoadFacts,
    certificate_document,
    client_cpu,
    judge,
    schedule_lag_p99_ms,
)
from zerohop.analysis.client.fidelity_check import timing_errors
from zerohop.core.exit_codes import EXIT_INTERRUPTED_BASE, EXIT_UNREACHABLE, RunError, one_line
from zerohop.core.layout import GROUND_TRUTH_FILE
from zerohop.runner.locust_process import run_locust
from zerohop.runner.plan import RunPlan, manifest_config
from zerohop.storage import run_folder as results
from zerohop.storage.run_reader import load_run
from zerohop.storage.selfcheck_files import (
    attach_certificate,
    read_client_timings,
    read_ground_truth,
)
from zerohop.storage.summary_file import write_summary
from zerohop.workloads.kind_registry import workload_kind

DEFAULT_DURATION_S = 20.0
MIN_DURATION_S = 5.0
WARMUP_S = 2.0  # connections, imports and the first spawn are not the steady state
WARMUP_SHARE = 0.25
# every token's write time (ITL errors); room for every stream the client opens
TARGET_ARGS = ("--ground-truth-token-lags", "--max-num-seqs", "1024")
DEFAULT_WORKLOAD_FILE = "selfcheck_workload.yaml"
DEFAULT_WORKLOAD = """\
# zerohop selfcheck's default: short queries, the load that costs the client most per token
kind: short_query_flood
name: selfcheck
input_tokens: 64
max_tokens: 16
ignore_eos: true
load: {{kind: closed, users: {users}}}
"""


@dataclass(frozen=True)
class SelfcheckResult:
    run_dir: Path
    certificate: dict[str, Any]

    @property
    def passed(self) -> bool:
        return bool(self.certificate["verdict"]["result"] == "PASS")


def selfcheck_plan(intended: RunPlan, *, duration_s: float = DEFAULT_DURATION_S,
                   name: str = "selfcheck") -> RunPlan:
    """The run a self-check makes of an intended one: the same workloads, load and
    processes, against the embedded target, with the load generator's own CPU sampled
    and nothing else (no SLOs, no report, no microbenchmarks); its duration, not the
    run's --requests, ends it."""
    return replace(intended, host=None, telemetry="loadgen", slo={}, name=name,
                   duration_s=duration_s, model="", report=False, microbench="off",
                   requests=None)


def warmup_for(duration_s: float) -> float:
    return min(WARMUP_S, WARMUP_SHARE * duration_s)


def run_selfcheck(plan: RunPlan, bounds: Bounds | None = None, *,
                  default_workload: bool = False) -> SelfcheckResult:
    """Run the check `plan` describes (see `selfcheck_plan`) in a new results folder and
    return its certificate. `default_workload`: run the short-query default, at the
    plan's users (closed loop) or rate, instead of the plan's workload files."""
    run_dir = results.new_run_dir(plan.results_dir, plan.name)
    if default_workload:
        path = run_dir / DEFAULT_WORKLOAD_FILE
        path.write_text(DEFAULT_WORKLOAD.format(users=plan.users), encoding="utf-8")
        flood = workload_kind("short_query_flood").user_class
        plan = replace(plan, workloads=[path], classes=[flood])
    truth_path = run_dir / GROUND_TRUTH_FILE
    load_avg = os.getloadavg()[0] if hasattr(os, "getloadavg") else math.nan
    sim = _start_target(plan, truth_path)
    try:
        results.start_manifest(
            run_dir, name=plan.name,
            target={"url": sim.url, "kind": "embedded", "api": plan.api},
            workloads=[{"file": str(p)} for p in plan.workloads],
            load={"mode": "open" if plan.rate else "closed", "users": plan.users,
                  "rate_rps": plan.rate, "duration_s": plan.duration_s},
            slo={}, config=manifest_config(plan),
            locust={"workers": plan.workers},
        )
        with cores_apart(sim.pid) as placement:
            code = run_locust(plan, sim.url, run_dir)
    finally:
        sim.stop()  # the ground truth is flushed when the target exits
    if code >= EXIT_INTERRUPTED_BASE:
        raise RunError(f"the self-check was interrupted; its folder is {run_dir}", code)
    if results.read_manifest(run_dir).get("status") == "running":
        results.finish_manifest(run_dir, status="completed", end_reason="finished")
    machine = machine_facts(placement, load_avg)
    document = certify(plan, bounds or Bounds(), run_dir, truth_path, machine)
    attach_certificate(run_dir, document)
    write_summary(run_dir)
    return SelfcheckResult(run_dir, document)


def certify(plan: RunPlan, bounds: Bounds, run_dir: Path, truth_path: Path,
            machine: dict[str, Any]) -> dict[str, Any]:
    """The certificate of a finished self-check folder."""
    run = load_run(run_dir)
    warmup = warmup_for(plan.duration_s)
    timing = timing_errors(read_client_timings(run_dir), read_ground_truth(truth_path),
                           warmup_s=warmup)
    requests = run.requests
    sent = requests["sent_ts"].to_numpy(dtype=float)
    first = float(np.nanmin(sent)) if np.isfinite(sent).any() else math.nan
    start, end = first + warmup, first + plan.duration_s
    lag = requests["schedule_lag_ms"].to_numpy(dtype=float)
    open_loop = bool(np.isfinite(lag).any())
    cpu = client_cpu(run.telemetry, requests, start_ts=start, end_ts=end,
                     client_cores=len(machine["client_cpus"]))
    ended = requests["end_ts"].to_numpy(dtype=float)
    with np.errstate(invalid="ignore"):
        done = int(np.count_nonzero((ended > start) & (ended <= end)))
    figures = Figures(
        timing=timing,
        schedule_lag_p99_ms=schedule_lag_p99_ms(requests, after_ts=start),
        cpu=cpu,
        achieved_rps=done / (end - start) if end > start else math.nan,
    )
    load = LoadFacts(
        mode="open" if open_loop else "closed",
        intended_rps=plan.rate,
        users=None if open_loop else plan.users,
        processes=max(plan.workers, 1),
        duration_s=plan.duration_s,
        warmup_s=warmup,
        client_cores=len(machine["client_cpus"]),
    )
    verdict = judge(figures, load, bounds, machine_cpus=int(machine["cpus"] or 1))
    return certificate_document(figures, load, bounds, verdict, machine,
                                run_id=run_dir.name, created_at=results.utc_now_iso())


def _start_target(plan: RunPlan, truth_path: Path) -> Any:
    from zerohop.sim.embedded import start_embedded_target

    try:
        return start_embedded_target([*plan.sim_args, *TARGET_ARGS], ground_truth=truth_path)
    except Exception as exc:
        raise RunError(f"the embedded target could not start: {one_line(exc)}",
                       EXIT_UNREACHABLE) from None


@contextlib.contextmanager
def cores_apart(target_pid: int) -> Iterator[dict[str, list[int]]]:
    """While the block runs: the target on the last usable CPU, what this thread starts
    (Locust) on the others; on one CPU, or where affinity cannot be set, all share."""
    if not hasattr(os, "sched_getaffinity"):
        cpus = list(range(os.cpu_count() or 1))
        yield {"target_cpus": cpus, "client_cpus": cpus}
        return
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        yield {"target_cpus": cpus, "client_cpus": cpus}
        return
    target, client = cpus[-1:], cpus[:-1]
    with contextlib.suppress(OSError):  # a target that ended meanwhile
        for task in os.listdir(f"/proc/{target_pid}/task"):  # every thread of it
            with contextlib.suppress(OSError):
                os.sched_setaffinity(int(task), set(target))
    os.sched_setaffinity(0, set(client))  # inherited by the Locust processes started here
    try:
        yield {"target_cpus": target, "client_cpus": client}
    finally:
        os.sched_setaffinity(0, set(cpus))


def machine_facts(placement: dict[str, list[int]], load_avg_1m: float) -> dict[str, Any]:
    """What a certificate holds for: this machine, and how busy it was before the load."""
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_model": _cpu_model(),
        "cpus": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
        else os.cpu_count(),
        "load_avg_1m_before": round(load_avg_1m, 2) if math.isfinite(load_avg_1m) else None,
        **placement,
    }


def _cpu_model() -> str:
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8",
                                            errors="replace") as info:
        for line in info:
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"
