"""The arms page's "Layers" section: it reads the same summary the console prints and
`compare-<run>-arms.json` holds (`arms_summary`), shows each arm's cost per percentile
with its interval and net of the control, the replicas that served each arm, the
stream verdict and what is estimated — and escapes every name it did not write."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.analysis.test_arms import drifting_rows, run_of
from tests.synthetic_runs import HOSTILE
from zerohop.analysis.run_data import RunData
from zerohop.client.arms import ArmAssigner
from zerohop.report.build import write_comparison
from zerohop.report.present_layers import layers_section, stream_verdict
from zerohop.runner.compare_layer import arms_summary

pytestmark = pytest.mark.unit

LAYER_MS = 5.0
REPLICAS = ("127.0.0.1:8000", "127.0.0.1:8001")


def layered_run(layer: str = "layer", replica_names: tuple[str, ...] = REPLICAS,
                n: int = 1500) -> RunData:
    """direct, a 0 ms control and a layer adding LAYER_MS, drawn at random per request
    over a drifting server; each request answered by one of two replicas in turn."""
    assigner = ArmAssigner(("direct", "control", layer), 3)
    arms: list[str | None] = [assigner.next_arm() for _ in range(n)]
    rows = drifting_rows(n, arms=arms, extra_ms={layer: LAYER_MS}, seed=3)
    for i, row in enumerate(rows):
        row["replica"] = replica_names[i % len(replica_names)]
    return run_of(rows, 120.0)


def summary_of(run: RunData) -> tuple[list[Any], dict[str, Any]]:
    made = arms_summary(run)
    assert made is not None
    return made


def first_ms(cell: str) -> float:
    match = re.match(r"([+-]?[0-9.]+) ms \[([+-]?[0-9.]+), ([+-]?[0-9.]+)\]", cell)
    assert match, cell
    return float(match.group(1))


def test_cost_per_percentile_with_intervals_and_net_of_the_control() -> None:
    _, summary = summary_of(layered_run())
    section = layers_section(summary)
    rows = {(r["arm"], r["metric"]): r["cells"] for r in section["cost_rows"]}
    assert section["stats"] == ["p50", "p90", "p99"]
    assert {arm for arm, _ in rows} == {"control", "layer"}
    layer_ttft = rows[("layer", "TTFT")]
    assert 3.0 < first_ms(layer_ttft[0]) < 7.0  # the injected 5 ms, at p50
    low, high = summary["costs"]["layer"]["ci95_ms"]["ttft_ms"]["p50"]
    assert low <= first_ms(layer_ttft[0]) <= high
    # net of the control: the layer only (the control against itself is not a row)
    assert {r["arm"] for r in section["net_rows"]} == {"layer"}
    net_ttft = next(r["cells"] for r in section["net_rows"] if r["metric"] == "TTFT")
    assert 3.0 < first_ms(net_ttft[0]) < 7.0
    assert len(section["answer"]) == 1
    assert section["answer"][0].startswith("layer adds TTFT p50 +")
    assert "net of the control p50 +" in section["answer"][0]


def test_the_zero_cost_control_is_checked_for_an_interval_holding_zero() -> None:
    _, summary = summary_of(layered_run())
    check = layers_section(summary)["control"]
    assert check["arm"] == "control"
    assert "TTFT p50" in check["holds"]
    summary["costs"]["control"]["ci95_ms"]["ttft_ms"]["p99"] = [0.4, 1.9]
    summary["costs"]["control"]["layer_cost_ms"]["ttft_ms"]["p99"] = 1.1
    moved = layers_section(summary)["control"]
    assert moved["ok"] is False
    assert moved["misses"] == "TTFT p99 +1.10 ms [+0.400, +1.90]"


def test_no_control_arm_means_no_check_and_no_net_rows() -> None:
    assigner = ArmAssigner(("direct", "layer"), 1)
    arms: list[str | None] = [assigner.next_arm() for _ in range(600)]
    _, summary = summary_of(run_of(drifting_rows(600, arms=arms, extra_ms={}), 120.0))
    section = layers_section(summary)
    assert section["control"] is None and section["net_rows"] == []
    assert "net of the control" not in section["answer"][0]


def test_route_distribution_per_arm_from_the_replica_field() -> None:
    _, summary = summary_of(layered_run())
    arms = {a["arm"]: a for a in layers_section(summary)["arms"]}
    assert list(arms) == list(summary["arms"]) and set(arms) == {"direct", "control", "layer"}
    for arm, row in arms.items():
        served = summary["arms"][arm]["replicas"]
        assert [r["name"] for r in row["replicas"]] == list(REPLICAS)
        assert [r["requests"] for r in row["replicas"]] == [f"{served[n]:,}" for n in REPLICAS]
        assert sum(r["share"] for r in row["replicas"]) == pytest.approx(1.0, abs=1e-3)
        assert row["requests"] == f"{summary['arms'][arm]['requests']:,}"


def test_stream_verdict_per_arm_says_changed_and_why() -> None:
    _, summary = summary_of(layered_run())
    stream = {s["arm"]: s for s in layers_section(summary)["stream"]}
    assert set(stream) == {"control", "layer"}
    assert all(not s["changed"] and s["verdict"].startswith("unchanged (") for s in
               stream.values())
    changed = {"changed": True, "reasons": ["tokens per read 1.00 → 8.00"]}
    assert stream_verdict(changed) == "CHANGED: tokens per read 1.00 → 8.00"
    unknown = {"changed": False, "tokens_per_read": float("nan"),
               "direct_tokens_per_read": 1.0}
    assert stream_verdict(unknown) == "unchanged (— tokens per read, direct 1.00)"


def test_the_page_escapes_hostile_arm_and_replica_names(tmp_path: Path) -> None:
    comparisons, summary = summary_of(layered_run(layer=HOSTILE,
                                                  replica_names=(HOSTILE, "r1")))
    page = write_comparison(comparisons, tmp_path / "arms.html", layers=summary)
    html = page.read_text()
    section = html[html.index('<section id="layers">'):]
    section = section[:section.index("</section>")]
    assert HOSTILE not in html
    escaped = "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert section.count(escaped) >= 6  # the answer, costs, net, arms, replicas, stream
    assert "Estimated:" in section


def test_the_plain_comparison_page_has_no_layers_section(tmp_path: Path) -> None:
    comparisons, _ = summary_of(layered_run(n=600))
    html = write_comparison(comparisons, tmp_path / "plain.html").read_text()
    assert 'id="layers"' not in html
    assert "Latency budget of the extra layer" in html
