"""summary.json's `saturation` block read back from a results folder and checked against
what the records imply, worked out by hand (not by the detector that wrote it)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.synthetic_runs import SyntheticRun, write_run
from zerohop.core.layout import REQUESTS_FILE, SATURATION_STOP_KEY
from zerohop.storage import run_folder
from zerohop.storage.summary_file import write_summary

pytestmark = pytest.mark.unit


def fifo_run(tmp_path: Path, offered_rps: float) -> Path:
    """600 requests offered at `offered_rps`, answered first come first served at 10 a
    second (a first token 50 ms after its turn, the end 2 s later)."""
    run_dir = write_run(tmp_path, SyntheticRun(n_requests=600))
    frame = pd.read_parquet(run_dir / REQUESTS_FILE)
    start = float(frame["scheduled_ts"].min())
    arrive = start + np.arange(len(frame)) / offered_rps
    first = np.maximum(arrive, start + np.arange(len(frame)) / 10.0) + 0.05
    frame = frame.assign(scheduled_ts=arrive, sent_ts=arrive, first_content_ts=first,
                         end_ts=first + 2.0, outcome="ok")
    frame.to_parquet(run_dir / REQUESTS_FILE)
    return run_dir


def test_the_block_says_when_a_fifo_queue_fell_behind(tmp_path: Path) -> None:
    # At 15 offered and 10 served a second, at second t the 10t-th request is the oldest
    # waiting, arrived at 2t/3: it has waited t/3 s, past the 1 s floor from t = 4 on
    # (the quickest first tokens, ~0.2 s, make no higher floor); the 15 s window of
    # evidence is whole at t = 4 + 14 = 18, over which 15 arrivals a second came.
    saturation = json.loads(write_summary(fifo_run(tmp_path, 15.0)).read_text())["saturation"]
    assert saturation["saturated"] is True
    assert saturation["signal"] == "first_token_wait"
    assert saturation["since_s"] == pytest.approx(4.0)
    assert saturation["detected_s"] == pytest.approx(18.0)
    assert saturation["offered_rps"] == pytest.approx(15.0)
    assert saturation["stopped_early"] is False and saturation["live"] is None


def test_a_load_the_queue_keeps_up_with_is_not_saturated(tmp_path: Path) -> None:
    saturation = json.loads(write_summary(fifo_run(tmp_path, 9.0)).read_text())["saturation"]
    assert saturation["saturated"] is False
    assert saturation["since_s"] is None and saturation["signal"] is None


def test_a_load_stopped_on_the_live_verdict_says_so(tmp_path: Path) -> None:
    run_dir = fifo_run(tmp_path, 15.0)
    live = {"saturated": True, "since_s": 5.0, "stopped_at_s": 21.0, "planned_s": 60.0}
    run_folder.update_manifest(run_dir, **{SATURATION_STOP_KEY: live})
    saturation = json.loads(write_summary(run_dir).read_text())["saturation"]
    assert saturation["stopped_early"] is True
    assert saturation["live"] == live


def test_the_reports_verdict_says_it(tmp_path: Path) -> None:
    from zerohop.report.build import build_report

    run_dir = fifo_run(tmp_path, 15.0)
    run_folder.update_manifest(run_dir, **{SATURATION_STOP_KEY: {
        "saturated": True, "stopped_at_s": 21.0, "planned_s": 60.0}})
    page = build_report(run_dir).read_text()
    verdict = page[page.index('id="saturation"'):].split("</p>", 1)[0]
    assert "Saturated since 4 s of the load (found at 18 s by the first-token wait) at " \
           "15 req/s offered" in verdict
    assert "--stop-when-saturated ended the load at 21 s of the planned 60 s" in verdict
