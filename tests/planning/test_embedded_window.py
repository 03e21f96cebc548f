"""The issue's check, end to end: a short automatic rate sweep against the embedded
target must not record more achieved load than it offered.

Over a point's measured window of W seconds the sweep records as offered the arrivals
it made (sent or dropped) ÷ W, and as achieved the ok requests that ended in the window
÷ W: a subset of the same arrivals over the same seconds, so achieved ≤ offered with no
slack (k = 0). Against the nominal rate λ the arrivals are a Poisson count, λW ± √(λW):
achieved ≤ λ(1 + k/√(λW)) with k = 3.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from zerohop.cli import cli

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
WORKLOAD = REPO / "workloads" / "short_query_flood.yaml"
DURATION_S = 10.0
K_SIGMA = 3.0


def test_a_short_sweep_never_achieves_more_than_it_offered(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, [
        "sweep", "--auto", "rate", "--start", "2", "--max-points", "2",
        "--duration", f"{DURATION_S:g}s", "--workload", str(WORKLOAD),
        "--only", "ShortQueryFlood", "--telemetry", "loadgen", "--results-dir", str(tmp_path),
    ])
    assert result.exit_code == 0, result.output
    (sweep_dir,) = tmp_path.glob("*-sweep-sweep")
    points = json.loads((sweep_dir / "index.json").read_text())["points"]
    assert [p["load"] for p in points] == [2.0, 4.0]
    for point in points:
        offered, achieved, load = point["offered_rps"], point["achieved_rps"], point["load"]
        assert point["requests"] > 0, point
        assert achieved <= offered * (1 + 1e-9), point
        assert achieved <= load * (1 + K_SIGMA / math.sqrt(load * DURATION_S)), point
        assert achieved >= 0.5 * offered, point  # far from saturation: most of it carried
