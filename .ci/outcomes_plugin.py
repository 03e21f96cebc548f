"""A pytest plugin for CI: one JSON line per test with its outcome and, for a skip, why.

Loaded by `.ci/run` (`-p outcomes_plugin` with `.ci` on PYTHONPATH) and written to the file
named by ZEROHOP_OUTCOMES_FILE, so `skip_gate.py` can tell an expected skip from a test
that passed by not running. pytest's own summary only counts skips; this keeps the node id
and the reason of each. A module that skips as a whole (`pytest.skip(allow_module_level=True)`,
a module-level `importorskip`) or fails to import never reaches the per-test hook, so
collection reports are kept too: a skipped module is a skip under its module's node id, a
collection error an `error` row.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

_written: dict[str, dict[str, Any]] = {}


def _skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        reason = str(longrepr[2])
        return reason.removeprefix("Skipped: ")
    return str(longrepr)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if hasattr(report, "wasxfail"):
        outcome = "xfailed" if report.skipped else "xpassed"
        _written.setdefault(report.nodeid, {"nodeid": report.nodeid, "outcome": outcome})
        return
    if report.skipped:
        _written[report.nodeid] = {"nodeid": report.nodeid, "outcome": "skipped",
                                   "reason": _skip_reason(report)}
    elif report.failed:
        _written[report.nodeid] = {"nodeid": report.nodeid, "outcome": "failed"}
    elif report.when == "call":
        _written.setdefault(report.nodeid, {"nodeid": report.nodeid, "outcome": "passed"})


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.skipped:
        _written[report.nodeid] = {"nodeid": report.nodeid, "outcome": "skipped",
                                   "reason": _skip_reason(report)}
    elif report.failed:
        _written[report.nodeid] = {"nodeid": report.nodeid, "outcome": "error",
                                   "reason": str(report.longrepr).strip().splitlines()[-1]
                                   if report.longrepr else ""}


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = os.environ.get("ZEROHOP_OUTCOMES_FILE")
    if not path or hasattr(session.config, "workerinput"):
        return  # under pytest-xdist the controller, which sees every report, writes
    with open(path, "w", encoding="utf-8") as out:
        for row in _written.values():
            out.write(json.dumps(row) + "\n")
