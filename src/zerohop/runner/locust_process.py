"""Locust as a child process: its command line, its log, the signals passed on to it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from zerohop.client.arms import format_arm_hosts
from zerohop.core.exit_codes import EXIT_BAD_INPUT, EXIT_WORKER_FAILED, RunError
from zerohop.core.layout import LOAD_STOPPED_KEY, LOCUST_LOG, PLAN_FILE
from zerohop.core.redaction import known_secrets, redact
from zerohop.loadgen.options import PLAN_SECRETS_ENV
from zerohop.runner.plan import RunPlan, plan_document
from zerohop.storage import run_folder as results


def write_plan(plan: RunPlan, run_dir: Path) -> dict[str, Any]:
    """Write the run's `plan.json`, secrets redacted, and return the values redaction
    masked ({} for most runs): those reach the Locust process through its environment
    (`PLAN_SECRETS_ENV`), never through the folder or a command line."""
    document = plan_document(plan)
    shown = redact(document, known_secrets())
    (run_dir / PLAN_FILE).write_text(json.dumps(shown, indent=2) + "\n")
    return {key: value for key, value in document.items() if shown[key] != value}


def locust_command(plan: RunPlan, host: str, run_dir: Path) -> list[str]:
    """Locust's own options and the run folder: zerohop's settings it reads from the
    folder's `plan.json` (`write_plan`), not from a second copy of the flags here."""
    from zerohop.shipped import loadtests_dir

    files = ",".join(str(path) for path in [loadtests_dir(), *plan.locustfiles])
    run_time_s = int(plan.duration_s + _probe_idle(plan))
    cmd = [
        sys.executable, "-m", "locust", "-f", files, "--headless",
        "-u", str(plan.users), "-r", str(max(plan.users, 1)), "-t", f"{run_time_s}s",
        "--host", host, "--stop-timeout", "5", "--csv", str(run_dir / "locust"),
        "--only-summary", "--loglevel", "WARNING",
        "--run-dir", str(run_dir), "--plan", str(run_dir / PLAN_FILE), "--no-embedded",
    ]
    if not plan.users_from_files:  # master and workers alike: -u goes by weight
        cmd += ["--users-by-weight"]
    if plan.workers:  # its own master port: two runs at once must not both take 5557
        port = str(_free_port())
        cmd += ["--processes", str(plan.workers), "--master-bind-port", port,
                "--master-port", port]
    if plan.arm_hosts:
        cmd += ["--arm-hosts", format_arm_hosts(plan.arm_hosts)]
    cmd += plan.classes
    return cmd


def _free_port() -> int:
    """A TCP port free on this host now (the kernel's pick), for Locust's master."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        return int(sock.getsockname()[1])


def _probe_idle(plan: RunPlan) -> float:
    """The probe's idle phase holds the load's start (`loadgen/probe.py`): the load still
    runs its whole duration after it."""
    return plan.probe_idle_s if plan.probe_rate > 0 else 0.0


def run_locust(plan: RunPlan, host: str, run_dir: Path) -> int:
    from zerohop.loadgen.selection import announce_selection
    from zerohop.runner.progress import follow_progress
    from zerohop.runner.saturation_watch import note_saturation_stop

    hidden = write_plan(plan, run_dir)
    cmd = locust_command(plan, host, run_dir)
    log_path = run_dir / LOCUST_LOG
    with open(log_path, "w") as log:
        # its own session: a terminal's Ctrl-C reaches Locust once, through us
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                env={**os.environ, "PYTHONUNBUFFERED": "1",
                                     PLAN_SECRETS_ENV: json.dumps(hidden)},
                                start_new_session=True)
        with _forwarding_stop_signals(proc) as received:
            announce_selection(proc.poll, run_dir)
            saturated = follow_progress(proc, run_dir, plan.duration_s + _probe_idle(plan),
                                        plan.requests,
                                        stop_when_saturated=plan.stop_when_saturated)
            proc.wait()
    relay_warnings(log_path)
    code = proc.returncode
    if saturated is not None and not received:
        note_saturation_stop(run_dir, saturated)
    if received:
        manifest = results.read_manifest(run_dir)
        # Locust notes when the load stopped; where it could not, the signal's arrival
        stopped = manifest.get(LOAD_STOPPED_KEY) or received.at
        results.update_manifest(run_dir, status="interrupted", end_reason=received[0],
                                locust_end_reason=manifest.get("end_reason"),
                                **{LOAD_STOPPED_KEY: stopped})
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


class ReceivedSignals(list[str]):
    """The names of the stop signals received, in order, and when the first came."""

    at: float | None = None


@contextlib.contextmanager
def _forwarding_stop_signals(proc: subprocess.Popen[bytes]) -> Iterator[ReceivedSignals]:
    """While Locust runs, SIGINT/SIGTERM are passed on to it (it drains, writes its
    records and quits) instead of killing us: the folder is then finished as usual."""
    received = ReceivedSignals()

    def forward(signum: int, _frame: object) -> None:
        if received.at is None:
            received.at = time.time()
        received.append(signal.Signals(signum).name)
        if proc.poll() is None:
            proc.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield received
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
