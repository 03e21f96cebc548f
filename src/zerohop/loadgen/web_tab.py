"""zerohop in Locust's web UI: a "zerohop" tab with exact per-workload percentiles, the
live saturation verdict in the progress line's words (`loadgen/live_verdict.py`, read
from the run folder's feed at each poll: "keeping up" or "SATURATED since 3 s (the
first-token wait)"), the report's path once a test stops, and a Host field that may be
left empty.

Locust's extension points used (locust 2.4x, the React UI): the Flask app
(`environment.web_ui.app`) for routes and request hooks; `template_args` keys
`extended_tabs` / `extended_tables` for the tab and its columns; and an
`extended_stats` entry added to the `/stats/requests` JSON that the UI polls every two
seconds, holding the tab's rows. `/zerohop/stats` serves the same data as plain JSON.

An empty Host on Start used to reach the users as a URL without a scheme (a traceback
per user). Now it means the embedded target when this process started one; otherwise
Start is refused with a message the UI shows under the form.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import gevent

from zerohop.core.metrics import title
from zerohop.loadgen.live_stats import METRICS, PERCENTILES, LiveLatencies
from zerohop.loadgen.live_verdict import SaturationWatch
from zerohop.loadgen.runtime import ProcessRuntime

log = logging.getLogger("zerohop")

TAB_KEY = "zerohop"
STATS_ROUTE = "/zerohop/stats"
EMPTY_HOST_REFUSED = (
    "zerohop: the Host field is empty and no embedded target is running: enter the "
    "target's URL (e.g. http://127.0.0.1:8000), or start Locust without --host to test "
    "the embedded target"
)
_METRIC_TITLES = {name: title(f"{name}_ms") for name in METRICS}


@dataclass
class ReportState:
    """The report of the last stopped test: none yet, being built, its path, or why not."""

    state: str = "none"  # none | building | ready | failed
    path: str | None = None
    error: str | None = None


def table_structure() -> list[dict[str, str]]:
    columns = [{"key": "workload", "title": "Workload"},
               {"key": "requests", "title": "Requests"},
               {"key": "failed", "title": "Failed"}]
    for metric in METRICS:
        columns += [{"key": f"{metric}_{p}", "title": f"{_METRIC_TITLES[metric]} {p} (ms)"}
                    for p, _ in PERCENTILES]
    columns.append({"key": "note", "title": "Note"})
    return columns


class LiveSaturation:
    """The tab's saturation verdict: one watch per test, started at its first poll with
    a results folder and renewed at each test start (the feed's files carry on across
    tests, so a new watch reads only the lines written after it began)."""

    def __init__(self) -> None:
        self.watch: SaturationWatch | None = None

    def restart(self) -> None:
        self.watch = None

    def poll(self, rt: ProcessRuntime) -> SaturationWatch | None:
        if self.watch is None and rt.run_dir is not None:
            self.watch = SaturationWatch(rt.run_dir)
            self.watch.skip_written()
        if self.watch is not None:
            self.watch.poll()
        return self.watch


def tab_rows(live: LiveLatencies, rt: ProcessRuntime, report: ReportState,
             watch: SaturationWatch | None = None) -> list[dict[str, Any]]:
    """What the tab shows: the workloads' rows (ms rounded to 0.01 for reading; the JSON
    route keeps them exact), the live saturation verdict once the feed has a line, then
    the results folder and the report's state."""
    rows = [{k: (round(v, 2) if isinstance(v, float) else v) for k, v in row.items()}
            for row in live.table()]
    words = watch.status().strip() if watch is not None else ""
    if words:
        rows.append({"workload": "Saturation", "note": words})
    if rt.run_dir is not None:
        rows.append({"workload": "Results folder", "note": str(rt.run_dir)})
    if report.state == "building":
        rows.append({"workload": "Report", "note": "building…"})
    elif report.state == "ready":
        rows.append({"workload": "Report", "note": report.path})
    elif report.state == "failed":
        rows.append({"workload": "Report", "note": f"not written: {report.error}"})
    return rows


def stats_json(live: LiveLatencies, rt: ProcessRuntime, report: ReportState,
               watch: SaturationWatch | None = None) -> dict[str, Any]:
    seen = watch is not None and bool(watch.latest)
    return {
        "workloads": live.table(),
        "saturation": watch.verdict.as_dict() if watch is not None and seen else None,
        "percentiles": [p for p, _ in PERCENTILES],
        "run_dir": str(rt.run_dir) if rt.run_dir is not None else None,
        "report": {"state": report.state, "path": report.path, "error": report.error},
    }


def install_web_tab(environment: Any, rt: ProcessRuntime) -> None:
    """Called at `init` on the master or the local runner when Locust has a web UI."""
    import json

    from flask import jsonify, request
    from werkzeug.datastructures import ImmutableMultiDict

    web_ui = environment.web_ui
    app = web_ui.app
    live = LiveLatencies()
    rt.live = live
    report = ReportState()
    rt.extras["web_report"] = report
    saturation = LiveSaturation()

    web_ui.template_args["extended_tabs"] = [{"title": "zerohop", "key": TAB_KEY}]
    web_ui.template_args["extended_tables"] = [{"key": TAB_KEY, "structure": table_structure()}]

    @app.before_request
    def _empty_host_means_embedded() -> Any:
        if request.path != "/swarm" or request.method != "POST":
            return None
        if "host" not in request.form or request.form["host"].strip():
            return None
        if rt.sim is None:
            log.warning("%s", EMPTY_HOST_REFUSED)
            return jsonify({"success": False, "message": EMPTY_HOST_REFUSED,
                            "host": environment.host})
        form = request.form.copy()
        form["host"] = rt.sim.url
        # Locust's /swarm handler reads its host from here (a cached property: settable)
        request.form = ImmutableMultiDict(form)
        return None

    @app.after_request
    def _add_tab_rows(response: Any) -> Any:
        if request.path != "/stats/requests" or not response.is_json:
            return response
        body = response.get_json()
        # Locust memoizes this response for a couple of seconds and may hand back the one
        # this hook already extended: replace the tab's entry, never append a second one
        others = [e for e in body.get("extended_stats", []) if e.get("key") != TAB_KEY]
        rows = tab_rows(live, rt, report, saturation.poll(rt))
        body["extended_stats"] = [*others, {"key": TAB_KEY, "data": rows}]
        response.set_data(json.dumps(body))
        return response

    @app.route(STATS_ROUTE)
    @web_ui.auth_required_if_enabled
    def zerohop_stats() -> Any:
        return jsonify(stats_json(live, rt, report, saturation.poll(rt)))

    environment.events.test_start.add_listener(lambda **_: _report_pending(report))
    environment.events.test_start.add_listener(lambda **_: saturation.restart())
    environment.events.test_stop.add_listener(
        lambda **_: _build_report_later(rt, report))


def _report_pending(report: ReportState) -> None:
    report.state, report.path, report.error = "none", None, None


def _build_report_later(rt: ProcessRuntime, report: ReportState) -> None:
    """After a stop from the web UI: the records are flushed (hooks' test_stop ran
    first); consolidate them and write the report in a greenlet of its own, so the
    stop itself returns at once."""
    if rt.run_dir is None:
        return
    report.state = "building"
    gevent.spawn(_build_report, rt, report)


def _build_report(rt: ProcessRuntime, report: ReportState) -> None:
    from zerohop.core.exit_codes import one_line
    from zerohop.report.build import build_report
    from zerohop.storage import run_folder as results

    assert rt.run_dir is not None
    try:
        if rt.sink is not None:
            rt.sink.flush()
        results.consolidate(rt.run_dir)
        path = build_report(rt.run_dir)
    except Exception as exc:  # shown in the tab in one line; the run goes on
        report.state, report.error = "failed", one_line(exc)
        log.warning("zerohop: report not written: %s", report.error)
        return
    report.state, report.path = "ready", str(path)
    log.info("zerohop: report %s", path)
