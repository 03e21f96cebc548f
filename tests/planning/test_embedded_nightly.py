"""The issue's acceptance check on the embedded target: five reruns of an unchanged
target raise no regression; the same target 15 % slower in decode (`--time-scale`
1.15× the baseline's) is flagged as a TPOT regression."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from zerohop.cli import cli

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
PROFILE = """\
name: embedded-ci
target:
  sim_args: "--time-scale {scale} --max-num-seqs 8"
load:
  workloads: [{workload}]
  only: [ShortQueryFlood]
  rate: 3
  duration_s: 5
samples: 2
microbench: "off"
"""


def write_profile(tmp_path: Path, scale: float) -> Path:
    path = tmp_path / f"nightly-{scale}.yaml"
    path.write_text(PROFILE.format(
        scale=scale, workload=REPO / "workloads" / "short_query_flood.yaml"))
    return path


@pytest.mark.alone  # timing-sensitive: CI runs it with no test beside it
def test_unchanged_reruns_pass_and_slower_decode_is_a_tpot_regression(tmp_path: Path) -> None:
    runner = CliRunner()
    history = tmp_path / "history"
    same = write_profile(tmp_path, 5.0)
    codes = []
    for _ in range(6):  # the baseline, then five reruns
        result = runner.invoke(cli, ["nightly", "--config", str(same), "--history", str(history)])
        codes.append(result.exit_code)
        assert result.exit_code == 0, result.output
    slower = write_profile(tmp_path, 5.75)  # decode (every step) 15 % slower
    result = runner.invoke(cli, ["nightly", "--config", str(slower), "--history", str(history)])
    assert result.exit_code == 1, result.output
    entries = [json.loads(line) for line in (history / "history.jsonl").read_text().splitlines()]
    # an unchanged rerun is within noise: neither a regression nor an improvement
    assert [e["status"] for e in entries[1:6]] == ["pass"] * 5, [
        [(g["metric"], g["stat"], g["verdict"]) for g in e["gates"]
         if g["verdict"] != "within noise"] for e in entries[1:6]]
    assert "tpot_ms p50" in entries[-1]["regressions"]
    tpot = next(g for g in entries[-1]["gates"] if g["metric"] == "tpot_ms" and g["stat"] == "p50")
    assert 10.0 < tpot["delta_pct"] < 20.0
