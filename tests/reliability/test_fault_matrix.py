"""Issue 10 §1: every injected fault → the right outcome; nothing lost, nothing doubled,
no greenlet or process dies. Driven through `measure_and_report` under gevent (the path
Locust's users take) and through a real Locust run with the sim's fault probabilities."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from tests.loadgen.conftest import locust_final_stats
from tests.reliability.conftest import (
    FLOOD_WORKLOAD,
    REPO,
    free_port,
    locust_cmd,
    only_run_dir,
    read_jsonl,
    run,
)
from tests.reliability.fault_cases import FAULTS
from zerohop.sim.launcher import start_sim

pytestmark = pytest.mark.integration

REPEATS = 2

# The outcome a correct client gives each case, from what the fault is (the sim's module
# docstring, the SSE spec, the APIs' error formats); written out here rather than read from
# the sim's ground truth or built with zerohop.core.records, so a client and a sim that share a
# mistake still fail. "a|b": either is right (a reset before the status line may land
# before or after the connection is seen as established).
EXPECTED_OUTCOME: dict[str, str] = {
    "baseline": "ok",
    "refused": "connect_error",
    "reset_mid": "incomplete_stream",
    "reset_before_status": "connect_error|incomplete_stream",
    "drop_mid": "incomplete_stream",
    "drop_after_headers": "incomplete_stream",
    "stall_before_first": "timeout_ttft",
    "stall_before_first_short": "ok",
    "stall_mid": "stall",
    "stall_mid_short": "ok",
    "slow_headers": "timeout_ttft",
    "slow_headers_short": "ok",
    "http_429": "http_429",
    "http_429_nobody": "http_429",
    "http_500": "http_500",
    "http_500_nobody": "http_500",
    "http_503": "http_503",
    "http_503_nobody": "http_503",
    "stream_error": "stream_error:internal_error",
    "stream_error_first": "stream_error:overloaded_error",
    # a line with no field separator is a field with an empty value, which the SSE spec
    # says to ignore: the stream is still a good one
    "malformed_sse": "ok",
    # a `data:` event whose JSON is cut short is a protocol error, whatever follows it
    "invalid_json": "protocol_error",
    "missing_terminator": "incomplete_stream",
    "oversized_chunk": "ok",
}


@pytest.mark.parametrize("api", ["openai-chat", "anthropic", "openai-responses"])
def test_each_fault_gets_its_outcome_under_gevent(api: str, tmp_path: Path) -> None:
    assert EXPECTED_OUTCOME.keys() == FAULTS.keys()
    truth_path = tmp_path / "truth.jsonl"
    closed_url = f"http://127.0.0.1:{free_port()}"  # nothing listens: connection refused
    with start_sim(["--seed", "1"], ground_truth=truth_path) as sim:
        res = run([sys.executable, "-m", "tests.reliability.fault_driver", sim.url, closed_url,
                   str(tmp_path / "run"), api, str(REPEATS)], cwd=REPO, timeout=120)
        assert res.returncode == 0, res.stderr[-3000:]
        assert sim.alive(), "the target died"
    out = json.loads(res.stdout.strip().splitlines()[-1])

    # no greenlet died, nothing left in flight
    assert all(g["dead"] and g["exception"] is None for g in out["greenlets"]), out["greenlets"]
    assert out["in_flight"] == 0
    # one record per request sent, each request id once
    records = out["records"]
    assert len(records) == len(out["sent"]) == len(FAULTS) * REPEATS
    assert len({r["request_id"] for r in records}) == len(records)
    assert Counter(r["workload"] for r in records) == Counter(out["sent"])
    # Locust saw exactly one E2E event per record, failed iff the record is not ok
    e2e = [e for e in out["events"] if e["type"] == "E2E"]
    assert len(e2e) == len(records)
    assert sum(e["failed"] for e in e2e) == sum(r["outcome"] != "ok" for r in records)

    truth = {str(t["request_id"]): t for t in read_jsonl(truth_path)}
    wrong = []
    for r in records:
        expected = EXPECTED_OUTCOME[r["workload"]]
        if r["outcome"] not in expected.split("|"):
            wrong.append((r["workload"], r["outcome"], expected, r["error_message"]))
    assert not wrong, wrong
    # where the server finished the request normally, client and server agree
    for r in records:
        gt = truth.get(r["request_id"])
        judged = EXPECTED_OUTCOME[r["workload"]] not in ("timeout_ttft", "stall")
        if gt is not None and judged and r["workload"] != "reset_before_status":
            assert r["outcome"] == gt["outcome"], (r, gt["outcome"])
    # the parquet file reads back with the same rows
    df = pd.read_parquet(tmp_path / "run" / "requests.parquet")
    assert sorted(df.request_id) == sorted(r["request_id"] for r in records)


FAULTS_CONFIG = """
faults:
  http_429: {probability: 0.08}
  http_503_nobody: {probability: 0.08}
  stream_error: {probability: 0.08, after: 2}
  drop_mid: {probability: 0.06, after: 2}
  reset: {probability: 0.06, after: 2}
  malformed_sse: {probability: 0.05}
  missing_terminator: {probability: 0.06}
  stall_mid: {probability: 0.05, after: 2, s: 1.5}
"""
# the sim's fault name (None: no fault drawn) → the outcome a correct client gives it, with
# the run's 1 s stall timeout (see EXPECTED_OUTCOME for why malformed SSE is "ok")
DRAWN_FAULT_OUTCOME: dict[str | None, str] = {
    None: "ok",
    "http_429": "http_429",
    "http_503_nobody": "http_503",
    "stream_error": "stream_error:internal_error",
    "drop_mid": "incomplete_stream",
    "reset": "incomplete_stream",
    "malformed_sse": "ok",
    "missing_terminator": "incomplete_stream",
    "stall_mid": "stall",
}


def test_real_locust_run_with_probabilistic_faults_loses_nothing(tmp_path: Path) -> None:
    """A headless Locust run against a sim that misbehaves on ~half the requests: the
    run completes, every request the sim saw has exactly one record with the outcome its
    drawn fault implies (stalls → `stall` with the 1 s stall timeout), and Locust counted
    each."""
    config = tmp_path / "faults.yaml"
    config.write_text(FAULTS_CONFIG)
    truth = tmp_path / "truth.jsonl"
    wl = tmp_path / "flood.yaml"
    wl.write_text(FLOOD_WORKLOAD.format(max_tokens=8, users=6))
    res = run(locust_cmd(
        "--headless", "-u", "6", "-r", "6", "-t", "8s", "--stop-timeout", "5",
        "--results-dir", str(tmp_path / "r"), "--json-file", str(tmp_path / "loc"),
        "--workload", str(wl), "--stall-timeout", "1", "--telemetry", "",
        "--sim-args", f"--config {config} --ground-truth {truth} --seed 7",
        "ShortQueryFlood"), timeout=90)
    assert res.returncode in (0, 1), res.stderr[-3000:]  # 1: some requests failed
    assert "Traceback" not in res.stderr, res.stderr[-3000:]
    run_dir = only_run_dir(tmp_path / "r")
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "completed"
    df = pd.read_parquet(run_dir / "requests.parquet")
    assert df.request_id.is_unique and len(df) > 40
    gt = {str(t["request_id"]): t for t in read_jsonl(truth)}
    # the prompt-size calibration's few requests (own client id prefix) are not load
    measured_clients = {rid.rsplit("-", 1)[0] for rid in df.request_id}
    calibration = [rid for rid in gt if rid.rsplit("-", 1)[0] not in measured_clients]
    assert len(calibration) <= 8, calibration
    for rid in calibration:
        del gt[rid]
    # every request the sim finished is recorded exactly once, with the outcome it implies
    missing = set(gt) - set(df.request_id)
    assert not missing, list(missing)[:5]
    outcomes = df.set_index("request_id").outcome
    # cancelled on both sides: the run's end cut it off (at most one request per user)
    cut_off = {rid for rid, t in gt.items()
               if t["outcome"] == outcomes[rid] == "cancelled"}
    assert len(cut_off) <= 6, cut_off
    for rid, t in gt.items():
        if rid not in cut_off:
            fault = str(t["fault"]).split(";")[0] if t.get("fault") else None
            assert outcomes[rid] == DRAWN_FAULT_OUTCOME[fault], (rid, outcomes[rid], t)
    assert len(set(df.outcome)) >= 6, df.outcome.value_counts()
    # the only records without a server-side twin are those cut off at the end
    extra = df[~df.request_id.isin(gt.keys())]
    assert set(extra.outcome) <= {"cancelled"}, extra.outcome.value_counts()
    flood = locust_final_stats(tmp_path / "loc")[("E2E", "flood")]
    assert flood["num_requests"] == len(df)
    assert flood["num_failures"] == int((df.outcome != "ok").sum())
