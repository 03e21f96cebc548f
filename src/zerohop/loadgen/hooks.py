"""Locust event hooks: the edges where zerohop meets Locust's lifecycle.

`install(events)` is called by every file in `loadtests/`; it registers the listeners
once. Each listener is short and delegates: options (`options.py`), records
(`runtime.py`), the embedded target (`embedded.py`), telemetry, the results folder.
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path
from typing import Any

import gevent

from zerohop.client.target_check import check_target
from zerohop.core import records as rec
from zerohop.core.exit_codes import EXIT_BAD_INPUT, EXIT_UNREACHABLE, EXIT_WORKER_FAILED, RunError
from zerohop.core.layout import LOAD_STOPPED_KEY
from zerohop.core.redaction import known_secrets, scrub
from zerohop.loadgen import answer_probe, probe, quiet_hub, run_limits, worker_health
from zerohop.loadgen import options as opt
from zerohop.loadgen.log_scrub import scrub_log_output
from zerohop.loadgen.runtime import MSG_DRAIN, MSG_DRAINED, MSG_RECORDS, ProcessRuntime, runtime_of
from zerohop.loadgen.ttft_table import log_ttft_table
from zerohop.storage import run_folder as results

log = logging.getLogger("zerohop")
_INSTALLED = "_zerohop_hooks_installed"


def install(events: Any) -> None:
    if getattr(events, _INSTALLED, False):
        return
    setattr(events, _INSTALLED, True)
    events.init_command_line_parser.add_listener(opt.add_arguments)
    events.init.add_listener(scrub_log_output)  # first: before anything is logged
    events.init.add_listener(_apply_plan)  # then the settings, before anything reads them
    events.init.add_listener(_on_init)
    events.test_start.add_listener(_on_test_start)
    events.test_stopping.add_listener(_on_test_stopping)
    events.test_stop.add_listener(_on_test_stop)
    events.quitting.add_listener(_on_quitting)


def _role(runner: Any) -> str:
    from locust.runners import MasterRunner, WorkerRunner

    if isinstance(runner, MasterRunner):
        return "master"
    if isinstance(runner, WorkerRunner):
        return "worker"
    return "local"


def _fail(message: str, code: int = EXIT_BAD_INPUT) -> None:
    """Bad input at start-up: one line, the documented exit code, no traceback."""
    print(f"zerohop: error: {scrub(message, known_secrets())}", file=sys.stderr, flush=True)
    sys.exit(code)


# --- init -----------------------------------------------------------------------------
def _apply_plan(environment: Any, **_: Any) -> None:
    try:
        opt.apply_plan(environment)
    except ValueError as exc:
        _fail(str(exc))


def _on_init(environment: Any, runner: Any = None, **_: Any) -> None:
    if runner is None:
        return
    rt = ProcessRuntime(role=_role(runner))
    environment.zerohop_runtime = rt
    _observe_stop_signals(rt)
    if rt.role == "worker":
        rt.send = runner.send_message
        runner.register_message(MSG_DRAIN, lambda msg, **kw: _worker_drain(environment),
                                concurrent=True)
        return
    _validate_options(environment)
    if not environment.host:
        _start_embedded_target(environment, rt)
    elif not opt.locust_options(environment).plan:  # plain Locust: as `zerohop run` does,
        try:  # one line and exit 3 or 2, not a traceback from every user at spawn
            check_target(environment.host, opt.run_settings(environment).api)
        except RunError as exc:
            _fail(str(exc), exc.code)
    _select_workloads(environment, rt)
    _open_results(environment, rt)
    _record_selection(environment, rt)
    answer_probe.answer_alone(environment)  # before any load, outside Locust's -t
    if getattr(environment, "web_ui", None) is not None:
        from zerohop.loadgen.web_tab import install_web_tab

        install_web_tab(environment, rt)
    if rt.role == "master":

        runner.register_message(MSG_RECORDS, lambda msg, **kw: _master_receive(rt, msg))
        runner.register_message(MSG_DRAINED, lambda msg, **kw: _master_drained(rt, msg))
        worker_health.register(runner, rt)
        from zerohop.loadgen.run_limits import register_master

        register_master(environment)


def _observe_stop_signals(rt: ProcessRuntime) -> None:
    """Note which signal ended the run, for the manifest, without changing what Locust
    does with it: SIGINT still becomes Locust's KeyboardInterrupt, SIGTERM gets a second
    gevent watcher next to Locust's own (libev runs both)."""
    import signal

    previous = signal.getsignal(signal.SIGINT)

    def on_sigint(signum: int, frame: Any) -> None:
        if "signal" in rt.extras:  # a second Ctrl-C: the user insists, stop at once
            if callable(previous):
                previous(signum, frame)
            raise KeyboardInterrupt
        rt.extras["signal"] = "SIGINT"
        _note_load_stopped(rt)
        # KeyboardInterrupt in the main greenlet only (where Locust expects it), never
        # in whichever user greenlet or hub happened to run: no lost request, no traceback
        hub = gevent.get_hub()
        hub.loop.run_callback(hub.parent.throw, KeyboardInterrupt)

    def on_sigterm() -> None:
        rt.extras.setdefault("signal", "SIGTERM")
        _note_load_stopped(rt)

    if previous is signal.default_int_handler:  # Locust's --processes parent has its own
        signal.signal(signal.SIGINT, on_sigint)
    rt.extras["sigterm_watcher"] = gevent.signal_handler(signal.SIGTERM, on_sigterm)


def _validate_options(environment: Any) -> None:
    """Every flag and every workload file, before anything starts: bad input is one line
    and exit 2, never a traceback mid-run. (Whether each workload can run against this
    target is `_select_workloads`, once the target is known.)"""
    from zerohop.workloads.inputs import load_workloads

    try:
        settings = opt.run_settings(environment)
        settings.slo_targets  # noqa: B018 - parsed for its error
        settings.check_values()
        load_workloads(settings.workloads)
        opt.arm_hosts(environment)
        opt.local_tokenizer(environment)
        answer_probe.check_answer_probe(environment)
        opt.telemetry_sources(environment)
    except ValueError as exc:
        _fail(str(exc))


def _select_workloads(environment: Any, rt: ProcessRuntime) -> None:
    """Decide what runs here (loadgen.selection): an asked-for workload that cannot run
    is exit 2 with one line saying what the target has; a default left out is said on
    the console. The decision goes to the workers with the spawn message."""
    from zerohop.loadgen import selection as sel

    try:
        decision = sel.decide(environment)
    except ValueError as exc:
        if rt.sim is not None:
            rt.sim.stop()
        _fail(str(exc))
    sel.apply(environment, decision)
    sel.publish(environment, rt, decision)
    for line in decision.notes():
        print(line, file=sys.stderr, flush=True)


def _record_selection(environment: Any, rt: ProcessRuntime) -> None:
    """The decision, and each running workload's own SLOs (`workload_slo`: what decides
    its goodput and verdict when the run has no --slo), into the manifest."""
    decision = rt.extras.get("selection")
    if decision is not None and rt.run_dir is not None:
        from zerohop.loadgen import selection as sel

        specs = [getattr(c, "workload_spec", None) for c in sel.llm_user_classes(environment)]
        workload_slo = {s.name: s.slo.objectives for s in specs if s and s.slo.objectives}
        results.update_manifest(rt.run_dir, workload_selection={
            "run": decision.run, "names": [s.name for s in specs if s],
            "left_out": decision.left_out,
            "adapters": decision.adapters, "target_models": decision.target},
            workload_slo=workload_slo)


def _start_embedded_target(environment: Any, rt: ProcessRuntime) -> None:
    if opt.locust_options(environment).no_embedded:
        _fail("no --host given and --no-embedded set: nothing to test", EXIT_BAD_INPUT)
    from zerohop.sim.embedded import start_embedded_target

    args = opt.run_settings(environment).sim_argv
    try:
        rt.sim = start_embedded_target(args)
    except Exception as exc:  # the embedded target could not start: refuse to guess a host
        from zerohop.core.exit_codes import one_line

        _fail(f"no --host given and the embedded target could not start: {one_line(exc)}",
              EXIT_UNREACHABLE)
    environment.host = rt.sim.url
    log.info("zerohop: no --host given; embedded target started at %s", rt.sim.url)


def _open_results(environment: Any, rt: ProcessRuntime) -> None:
    settings, own = opt.run_settings(environment), opt.locust_options(environment)
    if own.run_dir:
        rt.run_dir = Path(own.run_dir)
        rt.run_dir.mkdir(parents=True, exist_ok=True)
    else:
        rt.run_dir = results.new_run_dir(settings.results_dir, own.run_name)
    rt.sink = results.RecordSink(rt.run_dir, "locust-" + rt.role)
    manifest = results.read_manifest(rt.run_dir)
    if not manifest:  # `zerohop run` writes its own, richer manifest first
        opts = getattr(environment, "parsed_options", None)
        results.start_manifest(
            rt.run_dir,
            name=own.run_name,
            target={"url": environment.host, "kind": "embedded" if rt.sim else "external",
                    "api": settings.api},
            slo=settings.slo_targets,
            config=dict(vars(opts)) if opts is not None else {},
            locust={"role": rt.role},
        )
    log.info("zerohop: results folder %s", rt.run_dir)


# --- master side of the record flow ---------------------------------------------------
def _master_receive(rt: ProcessRuntime, msg: Any) -> None:
    data = msg.data or {}
    rows = data.get("rows", [])
    worker_health.note_process(rt, msg.node_id, rows)
    if rt.sink is not None:
        rt.keep_rows(rows)
    if rt.live is not None:
        rt.live.add_many([row for row in rows if row.get("outcome") != rec.NOT_SENT])
    if rt.telemetry is not None and data.get("telemetry"):
        rt.telemetry.add_samples(data["telemetry"])


def _master_drained(rt: ProcessRuntime, msg: Any) -> None:
    drained = rt.extras.setdefault("drained", {})
    drained[msg.node_id] = msg.data or {}


def _worker_drain(environment: Any) -> None:
    rt = runtime_of(environment)
    run_limits.close_concurrency_cap(environment)
    rt.drain(opt.locust_options(environment).drain_timeout)
    rt.flush_outbox()
    if rt.send is not None:
        rt.send(MSG_DRAINED, rt.counters.as_dict())


# --- test start / stop ----------------------------------------------------------------
def _on_test_start(environment: Any, **_: Any) -> None:
    rt = getattr(environment, "zerohop_runtime", None)
    if rt is None:
        return
    rt.draining = False
    rt.extras["drained"] = {}
    audit_dir = opt.locust_options(environment).audit_records_dir
    if audit_dir and rt.audit is None and rt.role != "master":
        from zerohop.client.llm_client import process_tag

        rt.audit = results.RecordSink(Path(audit_dir), "audit-" + process_tag())
    if rt.role == "master" and environment.parsed_options is not None:
        # sent to the workers with the spawn message: each takes its share of a schedule
        setattr(environment.parsed_options, opt.WORKER_COUNT, environment.runner.worker_count)
    rt.start_sender()
    if rt.role in ("local", "master"):
        _start_telemetry(environment, rt)
    if rt.role == "master":

        worker_health.start_watch(environment.runner, rt)
        probe.start_probe(environment)  # its idle phase, before the workers spawn
    if rt.role == "worker":
        _prepare_worker(environment, rt)
    elif rt.role == "local":
        _prepare_load(environment)
    answer_probe.start_under_load(environment)  # the sending process only
    quiet_hub.warm_locust_stop()
    # the measured window starts here: the loop-lag probe sees the load, not the set-up
    if rt.role == "worker":
        _start_worker_self_telemetry(environment, rt)
    elif rt.telemetry is not None:
        rt.telemetry.start_loop_lag()


def _prepare_load(environment: Any) -> None:
    from zerohop.loadgen.dispatcher import start_open_loop_dispatchers
    from zerohop.loadgen.run_limits import start_budget_watch

    _prepare_bindings(environment)
    probe.start_probe(environment)  # its idle phase: after the set-up, before any load
    start_open_loop_dispatchers(environment)
    start_budget_watch(environment)
    quiet_hub.keep_collector_off_the_reads()


def _prepare_worker(environment: Any, rt: ProcessRuntime) -> None:
    """A worker runs what the master decided (never its own guess), and when its set-up
    fails it tells the master why before it goes (loadgen.worker_health)."""
    from zerohop.loadgen import selection as sel

    try:
        decision = sel.received(environment, rt)
        if decision is None:  # a master that sent none: decide the same way it would
            decision = sel.decide(environment)
            sel.publish(environment, rt, decision)
        sel.apply(environment, decision)
        _prepare_load(environment)
    except Exception as exc:
        from zerohop.core.exit_codes import one_line

        worker_health.report_failure(rt, f"failed at test start: {one_line(exc)}")
        raise


def _prepare_bindings(environment: Any) -> None:
    """Read traces, plan and calibrate before the first user starts: this CPU work would
    otherwise block the hub while other streams are being timed."""
    from zerohop.loadgen.users import LLMUser
    from zerohop.loadgen.workload_binding import binding_for

    for user_class in environment.user_classes:
        if isinstance(user_class, type) and issubclass(user_class, LLMUser):
            binding_for(environment, user_class)


def _start_telemetry(environment: Any, rt: ProcessRuntime) -> None:
    if rt.telemetry is not None or rt.run_dir is None:
        return
    from zerohop.telemetry.recorder import TelemetryRecorder

    sources = opt.telemetry_sources(environment)
    if sources:
        rt.telemetry = TelemetryRecorder(sources, rt.run_dir, anchor=rt.anchor,
                                         defer_loop_lag=True)
        rt.telemetry.start()


def _start_worker_self_telemetry(environment: Any, rt: ProcessRuntime) -> None:
    """A worker measures its own CPU, memory and event-loop lag and ships the samples
    to the master with its records."""
    from zerohop.telemetry.client_process import start_self_telemetry
    from zerohop.telemetry.samples import TelemetryClock
    from zerohop.telemetry.spec import LoadgenSource

    loadgen = next((s for s in opt.telemetry_sources(environment)
                    if isinstance(s, LoadgenSource)), None)
    if loadgen is not None and rt.self_telemetry is None:
        rt.self_telemetry = start_self_telemetry(
            TelemetryClock(rt.anchor), interval_s=loadgen.interval_s, loop_lag=loadgen.loop_lag)


def _on_test_stopping(environment: Any, **_: Any) -> None:
    """Before Locust stops the users: drain every process that measures."""
    rt = getattr(environment, "zerohop_runtime", None)
    if rt is None:
        return
    timeout = opt.locust_options(environment).drain_timeout
    probe.halt_probe(environment)
    answer_probe.halt_answers(environment)
    if rt.role == "local":
        run_limits.close_concurrency_cap(environment)
        rt.drain(timeout)
        _end_loop_lag(rt)
        return
    if rt.role != "master":
        return
    runner = environment.runner
    workers = [c.id for c in runner.clients.all]
    rt.extras["drained"] = {}
    for worker_id in workers:
        runner.send_message(MSG_DRAIN, None, client_id=worker_id)
    deadline = time.monotonic() + timeout + 5.0
    while time.monotonic() < deadline:
        alive = {c.id for c in runner.clients.all if c.state != "missing"}
        if alive.issubset(rt.extras["drained"].keys()):
            break
        gevent.sleep(0.05)

    worker_health.stop_watch(runner, rt)
    _end_loop_lag(rt)


def _end_loop_lag(rt: ProcessRuntime) -> None:
    """The measured window is over once every process drained: writing the results
    (JSONL → Parquet, ~100 ms) is not load, and its loop lag is nobody's latency."""
    if rt.telemetry is not None:
        rt.telemetry.stop_loop_lag()


def _on_test_stop(environment: Any, **_: Any) -> None:
    rt = getattr(environment, "zerohop_runtime", None)
    if rt is None:
        return
    if rt.role in ("local", "worker"):
        from zerohop.loadgen.dispatcher import stop_open_loop_dispatchers
        from zerohop.loadgen.run_limits import stop_budget_watch

        stop_open_loop_dispatchers(environment)
        stop_budget_watch(environment)
    if rt.self_telemetry is not None:
        rows = rt.self_telemetry.stop()
        rt.self_telemetry = None
        if rows and rt.send is not None:
            rt.send(MSG_RECORDS, {"rows": [], "telemetry": rows})
    probe.stop_probe(environment)
    answer_probe.finish_answers(environment)
    rt.stop_sender()


def _on_quitting(environment: Any, **_: Any) -> None:
    rt = getattr(environment, "zerohop_runtime", None)
    if rt is None or rt.role == "worker":
        return
    try:
        _stop_if_interrupted(environment, rt)
        rt.stop_sender()
        if rt.telemetry is not None:
            rt.telemetry.stop()
        rt.close_sinks()
        if rt.run_dir is not None:
            results.consolidate(rt.run_dir)
            log_ttft_table(environment, rt.run_dir)
            counters = rt.counters.as_dict()
            for data in rt.extras.get("drained", {}).values():
                for key in ("dropped_arrivals", "cancelled", "not_sent"):
                    counters[key] = counters.get(key, 0) + int(data.get(key, 0))
            status, end_reason, failed = _end_state(environment, rt)
            code = getattr(environment, "process_exit_code", None)
            stopped = rt.extras.get(LOAD_STOPPED_KEY)
            results.finish_manifest(
                rt.run_dir,
                status=status,
                end_reason=end_reason,
                counters=counters,
                locust_exit_code=code,
                **({LOAD_STOPPED_KEY: stopped} if stopped is not None else {}),
                **({"workers_failed": failed} if failed else {}),
            )
            if not opt.locust_options(environment).plan:  # `zerohop run` writes its own
                from zerohop.storage.summary_file import try_write_summary  # pandas: lazy
                why_not = try_write_summary(rt.run_dir)
                if why_not is not None:
                    log.warning("zerohop: summary.json not written: %s", why_not)
    finally:
        if rt.sim is not None:
            rt.sim.stop()



def _end_state(environment: Any, rt: ProcessRuntime) -> tuple[str, str, list[Any]]:
    """(status, end_reason, failed workers). A worker that failed or left early makes
    the run `partial`, names itself in the end reason, and sets the exit code."""

    failed: list[Any] = []
    if rt.role == "master":
        worker_health.stop_watch(environment.runner, rt, last_look=False)
        failed = worker_health.failures(rt)
    end_reason = rt.extras.get("end_reason")
    if failed:
        environment.process_exit_code = EXIT_WORKER_FAILED
        reason = worker_health.summary_line(failed)
        return "partial", reason if end_reason is None else f"{end_reason}; {reason}", failed
    return ("completed" if end_reason is None else "interrupted"), end_reason or "finished", []


def _note_load_stopped(rt: ProcessRuntime) -> None:
    """When a signal cut the load short (the first note wins), in the records' clock:
    the measured window ends there, not at the planned end (analysis/measured_window)."""
    rt.extras.setdefault(LOAD_STOPPED_KEY, time.time())


def _stop_if_interrupted(environment: Any, rt: ProcessRuntime) -> None:
    """Locust quits on SIGINT/SIGTERM without stopping the test first: the users are
    still running when `quitting` fires. Stop them here, through the normal drain
    (test_stopping), so in-flight requests finish or are recorded as cancelled while
    the sink is still open, and name the cause for the manifest."""
    from locust.runners import STATE_RUNNING, STATE_SPAWNING

    gevent.sleep(0)  # let a pending SIGTERM watcher note the signal
    if rt.extras.get("signal"):  # a distributed master's own shutdown may already be stopping
        rt.extras.setdefault("end_reason", rt.extras["signal"])
    runner = environment.runner
    if runner is None or runner.state not in (STATE_SPAWNING, STATE_RUNNING):
        return
    rt.extras.setdefault("end_reason", "stopped before the end")
    _note_load_stopped(rt)
    log.warning("zerohop: run interrupted (%s); draining and keeping what was measured",
                rt.extras["end_reason"])
    runner.stop()
