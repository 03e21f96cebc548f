"""Structured output through real Locust against the embedded target: a workload with a
`response_format` on the Responses API beside the same workload without one, the sim
answering a share with bare words; the judged shares land in the records and the report."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

pytestmark = pytest.mark.integration

WORKLOADS = """
workloads:
  - kind: short_query_flood
    name: json
    api: openai-responses
    input_tokens: {type: uniform, min: 16, max: 64}
    max_tokens: 12
    response_format:
      type: object
      properties:
        title: {type: string}
        year: {type: integer, minimum: 1900}
        tags: {type: array, items: {type: string}}
      required: [title, year]
      additionalProperties: false
    load: {kind: closed, users: 2}
  - kind: short_query_flood
    name: plain
    api: openai-chat
    input_tokens: {type: uniform, min: 16, max: 64}
    max_tokens: 12
    load: {kind: closed, users: 2}
"""


def test_the_share_of_valid_answers_is_recorded_and_reported(tmp_path: Path) -> None:
    workloads = tmp_path / "structured.yaml"
    workloads.write_text(WORKLOADS)
    res = subprocess.run(
        [sys.executable, "-m", "zerohop", "run", "--workload", str(workloads),
         "--duration", "6s", "--telemetry", "none", "--microbench", "off",
         "--sim-args", "--invalid-json-share 0.4",
         "--results-dir", str(tmp_path / "results"), "--name", "structured"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )
    assert res.returncode == 0, (res.stdout[-2000:], res.stderr[-3000:])
    (run,) = [p for p in (tmp_path / "results").iterdir() if p.is_dir()]
    frame = pd.read_parquet(run / "requests.parquet")
    ok = frame[frame["outcome"] == "ok"]
    assert (frame["outcome"] == "ok").all(), frame["outcome"].value_counts()
    assert ok.loc[ok["workload"] == "plain", "structured_output"].isna().all()
    verdicts = ok.loc[ok["workload"] == "json", "structured_output"]
    assert verdicts.notna().all() and len(verdicts) >= 20
    counts = verdicts.value_counts()
    # the sim answers ~40 % with bare words: both verdicts must appear, and nothing else
    assert set(counts.index) == {"valid", "invalid_json"}, counts
    html = (run / "report.html").read_text()
    valid = 100.0 * counts["valid"] / len(verdicts)
    assert f"structured output · json</th><td>{valid:.1f} % valid" in html
