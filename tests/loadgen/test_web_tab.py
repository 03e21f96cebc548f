"""The zerohop tab of a real Locust web UI: an empty Host, live exact percentiles, the
live saturation verdict, the report after the stop (src/zerohop/loadgen/web_tab.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.loadgen.web_ui import locust_web_ui, wait_for
from zerohop.loadgen.live_stats import PERCENTILES
from zerohop.storage.run_folder import read_record_rows

pytestmark = pytest.mark.integration

RUN_TIMEOUT_S = 90.0  # generous: only how long we wait, never a judged figure
MIN_REQUESTS = 30


def test_empty_host_runs_the_embedded_target_and_the_tab_has_exact_percentiles(
        tmp_path: Path) -> None:
    with locust_web_ui(tmp_path, "ShortQueryFlood") as ui:
        started = ui.post("/swarm", {"user_count": "2", "spawn_rate": "2", "host": ""})
        assert started["success"], started
        assert started["host"].startswith("http://127.0.0.1:"), started  # the embedded one

        live = wait_for(lambda: _rows_with(ui, MIN_REQUESTS), RUN_TIMEOUT_S,
                        f"{MIN_REQUESTS} requests in /zerohop/stats")
        assert live["report"]["state"] == "none"
        polled = ui.get("/stats/requests")  # what the React UI polls for the tab
        tab = next(e for e in polled["extended_stats"] if e["key"] == "zerohop")
        names = [row["workload"] for row in tab["data"]]
        assert names[0] == "short_query_flood" and "Results folder" in names
        # two users keep up: the live verdict, in the progress line's words
        assert {"workload": "Saturation", "note": "keeping up"} in tab["data"]
        assert ui.get("/zerohop/stats")["saturation"]["saturated"] is False

        assert ui.post("/stop")["success"]
        final = wait_for(lambda: _report_done(ui), RUN_TIMEOUT_S, "the report after the stop")
        assert final["report"]["state"] == "ready", final["report"]
        report = Path(final["report"]["path"])
        assert report.is_file() and report.parent == Path(final["run_dir"])
        polled = ui.get("/stats/requests")
        tab = next(e for e in polled["extended_stats"] if e["key"] == "zerohop")
        assert {"workload": "Report", "note": str(report)} in tab["data"]

    rows, _ = read_record_rows(Path(final["run_dir"]))
    (workload,) = final["workloads"]
    assert workload["requests"] == len(rows) >= MIN_REQUESTS
    ok = [r for r in rows if r["outcome"] == "ok"]
    assert workload["failed"] == len(rows) - len(ok)
    assert len(ok) > 0.9 * len(rows), {r["outcome"] for r in rows}
    exact = {
        "ttft": [r["ttft_ms"] for r in ok],
        "tpot": [r["tpot_ms"] for r in ok if r["tpot_ms"] is not None],
        "itl": [v for r in ok for v in r["itl_ms"]],
    }
    for metric, values in exact.items():
        found = np.percentile(values, [q for _, q in PERCENTILES])
        for (name, _), want in zip(PERCENTILES, found, strict=True):
            assert workload[f"{metric}_{name}"] == pytest.approx(want, rel=1e-12), metric


def test_empty_host_without_an_embedded_target_is_refused_in_the_ui(tmp_path: Path) -> None:
    from zerohop.sim.embedded import start_embedded_target

    with start_embedded_target() as sim, \
            locust_web_ui(tmp_path, "--host", sim.url, "ShortQueryFlood") as ui:
        refused = ui.post("/swarm", {"user_count": "1", "spawn_rate": "1", "host": "  "})
        assert not refused["success"]
        assert "Host field is empty" in refused["message"]
        assert ui.get("/zerohop/stats")["workloads"] == []  # nothing was started
        # the field filled in again: it starts
        assert ui.post("/swarm", {"user_count": "1", "spawn_rate": "1", "host": sim.url})[
            "success"]
        wait_for(lambda: _rows_with(ui, 3), RUN_TIMEOUT_S, "3 requests after a real Host")
        ui.post("/stop")
    assert "unknown url type" not in ui.log()


def _rows_with(ui, n: int):
    stats = ui.get("/zerohop/stats")
    rows = stats["workloads"]
    return stats if rows and rows[0]["requests"] >= n else None


def _report_done(ui):
    stats = ui.get("/zerohop/stats")
    return stats if stats["report"]["state"] in ("ready", "failed") else None
