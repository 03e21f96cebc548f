"""`zerohop run`: the one command a new user runs first.

Start the embedded target unless a host is given, run the workloads through real Locust
(headless; `--workers N` for master + N worker processes), sample telemetry, run the GPU
microbenchmarks when a CUDA device is present, write the results folder and the report,
print a summary and the report's path.

Exit codes: 0 ok · 1 an SLO was missed · 2 bad input · 3 target unreachable ·
4 no request succeeded · 5 a load-generator worker failed or left early (the run is
partial) · 130/143 stopped by SIGINT/SIGTERM (the folder and report are still written,
as they are for 1, 4 and 5).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from zerohop.storage import run_folder as results
from zerohop.workloads.spec import KIND_CLASS_NAMES

EXIT_OK, EXIT_SLO, EXIT_BAD_INPUT, EXIT_UNREACHABLE = 0, 1, 2, 3
EXIT_NO_SUCCESS = 4  # the run measured only failures (or sent nothing)
EXIT_WORKER_FAILED = 5  # a Locust worker failed or left early: the run is partial
EXIT_INTERRUPTED_BASE = 128  # + the signal number, as shells report it
CLASS_NAMES = tuple(KIND_CLASS_NAMES.values())


class RunError(Exception):
    """An error with its exit code, shown as one line."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class RunPlan:
    host: str | None
    api: str
    workloads: list[Path]
    classes: list[str]
    users: int
    rate: float | None
    duration_s: float
    telemetry: str
    slo: dict[str, float]
    name: str
    workers: int
    results_dir: Path
    seed: int
    sim_args: list[str] = field(default_factory=list)
    model: str = ""
    report: bool = True
    microbench: str = "auto"


def parse_duration(text: str) -> float:
    """`90`, `90s`, `2m`, `1h30m` → seconds."""
    text = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text)
    parts = re.findall(r"(\d+(?:\.\d+)?)([hms])", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"--duration: {text!r} is not like 30s, 2m or 1h30m")
    return sum(float(n) * {"h": 3600, "m": 60, "s": 1}[u] for n, u in parts)


@click.command("run")
@click.option("--host", default=None, help="Target base URL (default: start the embedded target).")
@click.option("--api", type=click.Choice(["openai-chat", "openai-completions", "anthropic"]),
              default="openai-chat", show_default=True, help="Streaming API.")
@click.option("--workload", "workloads", multiple=True, type=click.Path(path_type=Path),
              help="Workload YAML file (repeatable). Default: all four shipped workloads.")
@click.option("--only", "classes", multiple=True, type=click.Choice(CLASS_NAMES),
              help="Run only these workload classes (repeatable).")
@click.option("--users", type=int, default=None, help="Concurrent Locust users (closed loop).")
@click.option("--rate", type=float, default=None,
              help="Total open-loop arrival rate, req/s (Poisson) instead of the files' load.")
@click.option("--duration", default="30s", show_default=True, help="Run time: 30s, 2m, 1h.")
@click.option("--telemetry", default="prom,loadgen", show_default=True,
              help="Sources: nvml, prom (the target's /metrics), prom=URL, loadgen; or none.")
@click.option("--slo", default="", help="e.g. ttft_p99_ms=500,tpot_p99_ms=50 (exit 1 if missed).")
@click.option("--name", default="run", show_default=True, help="Run name (folder suffix).")
@click.option("--workers", type=int, default=0, show_default=True,
              help="Locust worker processes (distributed mode); 0 = one process.")
@click.option("--results-dir", type=click.Path(path_type=Path), default=Path("results"),
              show_default=True)
@click.option("--model", default="", help="Model to request (default: the target's first).")
@click.option("--seed", type=int, default=1234, show_default=True)
@click.option("--sim-args", default="", help="Extra arguments for the embedded target.")
@click.option("--no-report", is_flag=True, help="Skip building report.html.")
@click.option("--microbench", type=click.Choice(["auto", "on", "off"]), default="auto",
              show_default=True, help="GPU microbenchmarks (auto: when a CUDA device exists).")
@click.option("--compare-layer", is_flag=True,
              help="Run twice, direct and through the layer, and report the layer's cost "
                   "(1 user unless --users/--rate: the hop's own cost; under load, delayed "
                   "arrivals also meet the engine mid-step, which adds to it).")
@click.option("--layer-url", default=None, help="With --compare-layer and --host: the gateway URL.")
@click.option("--layer-args", default="--per-request-ms 5", show_default=True,
              help="Embedded layer's options (with --compare-layer and no --layer-url).")
def run_command(**kw: Any) -> None:
    """Run the workloads against a target, sample telemetry, write results and report."""
    try:
        plan = _plan_from_flags(kw)
        if kw["compare_layer"]:
            code = run_compare_layer(plan, kw["layer_url"], shlex.split(kw["layer_args"]))
        else:
            code = run_once(plan).exit_code
    except RunError as exc:
        click.echo(f"zerohop: error: {exc}", err=True)
        sys.exit(exc.code)
    sys.exit(code)


def _plan_from_flags(kw: dict[str, Any]) -> RunPlan:
    from zerohop.loadgen.options import parse_slo
    from zerohop.loadgen.workload_binding import check_inputs, load_workloads
    from zerohop.shipped import ShippedFilesError, loadtests_dir, workloads_dir

    try:  # an incomplete install says so in one line, before anything starts
        loadtests_dir(), workloads_dir()
    except ShippedFilesError as exc:
        raise RunError(str(exc), EXIT_BAD_INPUT) from None
    try:
        duration = parse_duration(kw["duration"])
        slo = parse_slo(kw["slo"])
        workloads = list(kw["workloads"])
        specs = load_workloads([str(p) for p in workloads])
        for spec in specs:
            check_inputs(spec)
        if kw["users"] is not None and kw["users"] <= 0:
            raise ValueError("--users must be > 0")
        if kw["rate"] is not None and kw["rate"] <= 0:
            raise ValueError("--rate must be > 0")
        if kw["users"] is not None and kw["rate"] is not None:
            raise ValueError("--users and --rate are exclusive (closed or open loop)")
        if kw["workers"] < 0:
            raise ValueError("--workers must be >= 0")
        if duration <= 0:
            raise ValueError("--duration must be > 0")
        if kw["host"] and not re.match(r"^https?://[^/\s]+", kw["host"]):
            raise ValueError(f"--host: {kw['host']!r} is not an http:// URL")
        _check_telemetry(kw["telemetry"])
    except ValueError as exc:  # WorkloadError is a ValueError
        raise RunError(str(exc), EXIT_BAD_INPUT) from None
    return RunPlan(
        host=kw["host"], api=kw["api"], workloads=workloads,
        classes=list(kw["classes"]) or classes_for(specs),
        users=kw["users"] or (1 if kw["compare_layer"] else 8), rate=kw["rate"],
        duration_s=duration, telemetry=kw["telemetry"],
        slo=slo, name=kw["name"], workers=kw["workers"], results_dir=kw["results_dir"],
        seed=kw["seed"], sim_args=shlex.split(kw["sim_args"]), model=kw["model"],
        report=not kw["no_report"], microbench=kw["microbench"],
    )


def classes_for(specs: list[Any]) -> list[str]:
    """The user classes that run the given workload specs: naming workload files runs
    those workloads, not every shipped one beside them."""
    return list(dict.fromkeys(KIND_CLASS_NAMES[spec.kind] for spec in specs))


def _check_telemetry(spec: str) -> None:
    try:
        from zerohop.telemetry.spec import parse_telemetry_spec
    except ImportError:
        return
    parts = [p for p in spec.split(",") if p.strip() and p.strip() != "prom"]
    parse_telemetry_spec(",".join(parts))


# --- one run ---------------------------------------------------------------------------
@dataclass
class RunResult:
    run_dir: Path
    exit_code: int
    report: Path | None


def run_once(plan: RunPlan, *, kind: str | None = None, announce: bool = True) -> RunResult:
    sim = None
    host = plan.host
    if host is None:
        from zerohop.sim.embedded import start_embedded_target

        try:
            sim = start_embedded_target(plan.sim_args)
        except Exception as exc:
            raise RunError(f"the embedded target could not start: {one_line(exc)}",
                           EXIT_UNREACHABLE) from None
        host = sim.url
    try:
        check_reachable(host)
        run_dir = results.new_run_dir(plan.results_dir, plan.name)
        results.start_manifest(
            run_dir, name=plan.name,
            target={"url": host, "kind": kind or ("embedded" if sim else "external"),
                    "api": plan.api},
            workloads=[{"file": str(p)} for p in plan.workloads],
            load={"mode": "open" if plan.rate else "closed", "users": plan.users,
                  "rate_rps": plan.rate, "duration_s": plan.duration_s},
            slo=plan.slo,
            config={k: str(v) for k, v in vars(plan).items()},
            locust={"workers": plan.workers},
        )
        if announce:
            click.echo(f"zerohop: target {host} · results {run_dir}")
        locust_code = _run_locust(plan, host, run_dir)
        if locust_code < EXIT_INTERRUPTED_BASE:
            _maybe_microbench(plan, run_dir)
    finally:
        if sim is not None:
            sim.stop()
    return _finish(plan, run_dir, locust_code)


def one_line(exc: BaseException) -> str:
    """An error whose text carries a child's stderr tail, as one line: the summary and
    the child's last words (where the cause usually is)."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    if len(lines) <= 1:
        return lines[0] if lines else type(exc).__name__
    return f"{lines[0]}: {lines[-1]}"


def check_reachable(host: str) -> None:
    """Exit 3 early, with one line, when nothing answers at the host."""
    for path in ("/health", "/v1/models", "/"):
        try:
            with urllib.request.urlopen(host.rstrip("/") + path, timeout=5):
                return
        except urllib.error.HTTPError:
            return  # something answers HTTP: reachable
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            last = f"{host} is unreachable: {reason}"
            if isinstance(reason, ConnectionRefusedError | TimeoutError):
                raise RunError(last, EXIT_UNREACHABLE) from None
    raise RunError(last, EXIT_UNREACHABLE)


def locust_command(plan: RunPlan, host: str, run_dir: Path) -> list[str]:
    from zerohop.shipped import loadtests_dir

    cmd = [
        sys.executable, "-m", "locust", "-f", str(loadtests_dir()), "--headless",
        "-u", str(plan.users), "-r", str(max(plan.users, 1)), "-t", f"{int(plan.duration_s)}s",
        "--host", host, "--stop-timeout", "5", "--csv", str(run_dir / "locust"),
        "--only-summary", "--loglevel", "WARNING",
        "--run-dir", str(run_dir), "--api", plan.api, "--slo", _slo_text(plan.slo),
        "--telemetry", plan.telemetry, "--seed", str(plan.seed), "--no-embedded",
    ]
    for path in plan.workloads:
        cmd += ["--workload", str(path)]
    if plan.model:
        cmd += ["--model", plan.model]
    if plan.rate is not None:
        cmd += ["--rate-override", str(plan.rate)]
    if plan.workers:
        cmd += ["--processes", str(plan.workers)]
    cmd += plan.classes
    return cmd


def _slo_text(slo: dict[str, float]) -> str:
    return ",".join(f"{k}={v:g}" for k, v in slo.items())


def _run_locust(plan: RunPlan, host: str, run_dir: Path) -> int:
    from zerohop.cli.progress import follow_progress
    from zerohop.loadgen.selection import announce_selection

    cmd = locust_command(plan, host, run_dir)
    log_path = run_dir / "locust.log"
    with open(log_path, "w") as log:
        # its own session: a terminal's Ctrl-C reaches Locust once, through us
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                                start_new_session=True)
        with _forwarding_stop_signals(proc) as received:
            announce_selection(proc.poll, run_dir)
            follow_progress(proc, run_dir, plan.duration_s)
            proc.wait()
    relay_warnings(log_path)
    code = proc.returncode
    if received:
        manifest = results.read_manifest(run_dir)
        results.update_manifest(run_dir, status="interrupted", end_reason=received[0],
                                locust_end_reason=manifest.get("end_reason"))
        return 128 + int(getattr(signal, received[0]))
    if code == EXIT_WORKER_FAILED and results.read_manifest(run_dir).get("workers_failed"):
        return code  # a partial run: still summarised and reported (see _finish)
    if code not in (0, 1):  # Locust exits 1 when any request failed
        tail = log_path.read_text(errors="replace")[-1500:]
        if "zerohop: error:" in tail:
            line = tail[tail.rindex("zerohop: error:"):].splitlines()[0]
            results.finish_manifest(run_dir, status="refused",
                                    end_reason=line.removeprefix("zerohop: "))
            raise RunError(line.removeprefix("zerohop: error: "), EXIT_BAD_INPUT)
        raise RunError(f"locust exited with {code}; see {log_path}:\n{tail}", EXIT_BAD_INPUT)
    return code


WARNING_MARK = "zerohop: warning: "
_TRACEBACK = "Traceback (most recent call last):"


def last_error_line(log_path: Path) -> str:
    """`: <the last exception line in Locust's log>`, or "" when it holds none: why a run
    that recorded nothing sent nothing, in the one line that says so."""
    if not log_path.is_file():
        return ""
    last, in_traceback = "", False
    with open(log_path, errors="replace") as log:
        for line in log:
            if line.startswith(_TRACEBACK):
                in_traceback = True
            elif in_traceback and line.strip() and not line[0].isspace():
                last, in_traceback = line.strip(), False  # the traceback's exception line
    return f": {last[:200]}" if last else ""


def relay_warnings(log_path: Path) -> None:
    """The run's own one-line warnings (how prompts were sized, ...), logged by Locust's
    processes, shown on the console once each: a user should not have to read the log."""
    seen: list[str] = []
    with open(log_path, errors="replace") as log:
        for line in log:
            if WARNING_MARK in line:
                text = line[line.index(WARNING_MARK):].strip()
                if text not in seen:
                    seen.append(text)
    for text in seen:
        click.echo(text, err=True)


@contextlib.contextmanager
def _forwarding_stop_signals(proc: subprocess.Popen[bytes]) -> Iterator[list[str]]:
    """While Locust runs, SIGINT/SIGTERM are passed on to it (it drains, writes its
    records and quits) instead of killing us: the folder is then finished as usual."""
    received: list[str] = []

    def forward(signum: int, _frame: object) -> None:
        received.append(signal.Signals(signum).name)
        if proc.poll() is None:
            proc.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield received
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _maybe_microbench(plan: RunPlan, run_dir: Path) -> None:
    if plan.microbench == "off":
        return
    try:
        from zerohop.microbench.runner import cuda_available, run_microbench
    except ImportError:
        return
    available, reason = cuda_available()
    if not available:
        if plan.microbench == "on":
            click.echo(f"zerohop: microbenchmarks skipped: {reason}")
        return
    run_microbench(run_dir / "microbench.json", quick=True)


def _finish(plan: RunPlan, run_dir: Path, locust_code: int) -> RunResult:
    from zerohop.cli.console_summary import analyse, no_success_reason, print_summary, slo_verdict
    from zerohop.report.build import build_report

    analysis = analyse(run_dir)
    verdict = slo_verdict(analysis)
    print_summary(analysis, verdict)
    report_path = build_report(run_dir) if plan.report else None
    manifest = results.read_manifest(run_dir)
    results.update_manifest(run_dir, slo_verdict=verdict)
    if manifest.get("status") == "running":
        results.finish_manifest(run_dir, status="completed", end_reason="finished")
    if report_path is not None:
        click.echo(f"report: {report_path}")
    if locust_code >= EXIT_INTERRUPTED_BASE:  # 130 SIGINT, 143 SIGTERM
        return RunResult(run_dir, locust_code, report_path)
    failed_workers = results.read_manifest(run_dir).get("workers_failed") or []
    if failed_workers:
        from zerohop.loadgen.worker_health import summary_line

        click.echo(f"zerohop: PARTIAL RUN: {summary_line(failed_workers)}; what it would "
                   "have sent is missing from these figures", err=True)
        return RunResult(run_dir, EXIT_WORKER_FAILED, report_path)
    failed_all = no_success_reason(analysis)
    if failed_all is not None:
        if analysis.total.requests == 0:
            failed_all += last_error_line(run_dir / "locust.log")
        click.echo(f"zerohop: {failed_all}", err=True)
        return RunResult(run_dir, EXIT_NO_SUCCESS, report_path)
    return RunResult(run_dir, EXIT_SLO if verdict.get("failed") else EXIT_OK, report_path)


# --- direct vs through the layer -------------------------------------------------------
def run_compare_layer(plan: RunPlan, layer_url: str | None, layer_args: list[str]) -> int:
    """The same workload direct and through one extra hop; the comparison page prices it."""
    from zerohop.report.build import compare_dirs, write_comparison

    sim = None
    proxy = None
    host = plan.host
    try:
        if host is None:
            from zerohop.sim.embedded import start_embedded_target

            sim = start_embedded_target(plan.sim_args)
            host = sim.url
        if layer_url is None:
            from zerohop.sim.launcher import start_proxy

            proxy = start_proxy(host, layer_args)
            layer_url = proxy.url
        direct_plan = dataclasses.replace(plan, host=host, name=plan.name + "-direct")
        layer_plan = dataclasses.replace(plan, host=layer_url, name=plan.name + "-layer")
        direct = run_once(direct_plan, kind="embedded")
        layered = run_once(layer_plan, kind="layer")
    finally:
        if proxy is not None:
            proxy.stop()
        if sim is not None:
            sim.stop()
    stem = layered.run_dir.parent / f"compare-{direct.run_dir.name}-vs-layer"
    comparisons = compare_dirs([direct.run_dir, layered.run_dir], layer_of=direct.run_dir)
    write_comparison(comparisons, stem.with_suffix(".html"))
    budget = layer_cost(comparisons)
    stem.with_suffix(".json").write_text(json.dumps(budget, indent=2) + "\n")
    click.echo("layer cost (through the layer − direct, ms; 95% CI):")
    for metric, stats in budget["layer_cost_ms"].items():
        cells = "  ".join(f"{k} {v:+.2f}" for k, v in stats.items())
        click.echo(f"  {metric:<8} {cells}")
    click.echo(f"comparison: {stem.with_suffix('.html')}")
    return max(direct.exit_code, layered.exit_code)


def layer_cost(comparisons: list[Any]) -> dict[str, Any]:
    """The report's layer budget over all workloads (or the only one), per metric."""
    budgets = [b for c in comparisons for b in c.layer_budgets]
    chosen = next((b for b in budgets if b.workload == "all"), budgets[0] if budgets else None)
    cost: dict[str, dict[str, float]] = {}
    ci: dict[str, dict[str, list[float]]] = {}
    for row in chosen.rows if chosen is not None else []:
        cost.setdefault(row.metric, {})[row.stat] = round(row.layer_ms, 3)
        ci.setdefault(row.metric, {})[row.stat] = [round(row.ci_low, 3), round(row.ci_high, 3)]
    return {"workload": chosen.workload if chosen else None, "layer_cost_ms": cost, "ci95_ms": ci}
