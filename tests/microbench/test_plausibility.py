"""The plausible ranges pass the committed H200 reference and catch planted slips."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tests.microbench.plausibility import Violation, plausibility_violations
from zerohop.microbench.schema import load_microbench

pytestmark = pytest.mark.unit

REFERENCE_DIR = Path(__file__).resolve().parents[2] / "microbench" / "reference"
REFERENCES = sorted(REFERENCE_DIR.glob("*.json"))
H200 = REFERENCE_DIR / "nvidia-h200.json"
_SCALED = ("median", "p50", "p99", "min", "max", "mean", "stdev")


def reference() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(H200.read_text(encoding="utf-8"))
    return copy.deepcopy(doc)


def scale(stat: dict[str, Any], factor: float) -> None:
    for key in _SCALED:
        stat[key] *= factor


def metric(doc: dict[str, Any], bench: str, name: str) -> dict[str, Any]:
    stat: dict[str, Any] = doc["benchmarks"][bench]["metrics"][name]
    return stat


def figures(violations: list[Violation]) -> set[str]:
    return {v.figure for v in violations}


def test_there_is_a_reference_and_the_parsed_model_is_accepted_too() -> None:
    assert H200 in REFERENCES
    assert plausibility_violations(load_microbench(H200)) == []


@pytest.mark.parametrize("path", REFERENCES, ids=lambda p: p.name)
def test_every_committed_reference_is_plausible(path: Path) -> None:
    violations = plausibility_violations(json.loads(path.read_text(encoding="utf-8")))
    assert violations == [], "\n".join(map(str, violations))


def test_a_us_ms_slip_is_named_with_value_unit_and_range() -> None:
    doc = reference()
    scale(metric(doc, "launch", "launch_sync_roundtrip_us"), 1e-3)  # ms written as us
    v, *rest = plausibility_violations(doc)
    assert str(v) == (
        "launch.launch_sync_roundtrip_us p50 = 0.012627 us; expected between 2 and 100 us "
        "(launch + sync, ref 12.6 us)"
    )
    assert (v.figure, v.unit) == ("launch.launch_sync_roundtrip_us p50", "us")
    assert v.value == pytest.approx(0.012627)
    # and, as a consequence, the ring is no longer ahead of "launch + sync"
    assert figures(rest) == {"ring.ring_roundtrip_us p50"}


ALL_METRICS = [
    (bench, name)
    for bench, result in json.loads(H200.read_text(encoding="utf-8"))["benchmarks"].items()
    for name in result["metrics"]
]


@pytest.mark.parametrize("factor", [1e-3, 1e3], ids=["x1/1000", "x1000"])
@pytest.mark.parametrize(("bench", "name"), ALL_METRICS, ids=[f"{b}.{n}" for b, n in ALL_METRICS])
def test_every_figure_catches_a_factor_1000_slip(bench: str, name: str, factor: float) -> None:
    doc = reference()
    scale(metric(doc, bench, name), factor)
    assert f"{bench}.{name} p50" in figures(plausibility_violations(doc))


def test_a_wrong_unit_label_is_caught() -> None:
    doc = reference()
    stat = metric(doc, "launch", "launch_sync_roundtrip_us")
    stat["unit"] = "ms"
    scale(stat, 1e-3)
    (v,) = plausibility_violations(doc)
    assert v.figure == "launch.launch_sync_roundtrip_us p50" and v.unit == "ms"
    assert "unit 'us'" in v.expected


def test_swapped_stream_priorities_are_caught() -> None:
    doc = reference()
    metrics = doc["benchmarks"]["launch"]["metrics"]
    high, low = "small_kernel_latency_high_prio_us", "small_kernel_latency_low_prio_us"
    metrics[high], metrics[low] = metrics[low], metrics[high]
    violations = plausibility_violations(doc)
    assert any(v.figure == f"launch.{high} p50" and "low-priority" in v.expected
               for v in violations)


def test_ignored_priorities_are_caught_though_each_figure_is_in_range() -> None:
    doc = reference()
    for name in ("small_kernel_latency_high_prio_us", "small_kernel_latency_low_prio_us"):
        stat = metric(doc, "launch", name)
        scale(stat, 3000.0 / stat["p50"])  # both 3 ms: each in its range, no priority
    (v,) = plausibility_violations(doc)
    assert v.figure == "launch.small_kernel_latency_high_prio_us p50"
    assert "low-priority" in v.expected


def test_pinned_h2d_at_a_tenth_of_the_link_is_caught() -> None:
    doc = reference()
    link = doc["environment"]["pcie"]["theoretical_gbps_per_direction"]
    for point in doc["benchmarks"]["pcie"]["curve"]:
        if point["direction"] == "h2d" and point["memory"] == "pinned":
            scale(point["gbps"], 0.1 * link / point["gbps"]["p50"])
    scale(metric(doc, "pcie", "h2d_pinned_256MiB_gbps"), 0.1 * link / 54.966)
    violations = plausibility_violations(doc)
    assert figures(violations) == {
        "pcie.h2d_pinned_256MiB_gbps p50", "pcie.curve h2d pinned 1024 MiB p50",
    }
    assert all("63.0 GB/s link" in v.expected and v.unit == "GB/s" for v in violations)


def test_the_sweep_alone_carries_the_h2d_floor() -> None:
    """The smoke plan stops at 16 MiB: no 256 MiB figure, the largest copy is checked."""
    doc = reference()
    pcie = doc["benchmarks"]["pcie"]
    for name in [n for n in pcie["metrics"] if "MiB" in n]:
        del pcie["metrics"][name]
    pcie["curve"] = [p for p in pcie["curve"] if p["size_bytes"] <= 16 << 20]
    assert plausibility_violations(doc) == []
    for point in pcie["curve"]:
        if point["direction"] == "h2d" and point["memory"] == "pinned":
            scale(point["gbps"], 0.5)  # 86 % -> 43 % of the link
    assert figures(plausibility_violations(doc)) == {"pcie.curve h2d pinned 16 MiB p50"}


def test_copies_faster_than_the_link_are_caught() -> None:
    doc = reference()
    scale(metric(doc, "pcie", "d2h_pinned_256MiB_gbps"), 1.2)  # 104 % of the link
    assert figures(plausibility_violations(doc)) == {"pcie.d2h_pinned_256MiB_gbps p50"}


def test_no_link_from_nvml_cannot_pass_the_h2d_floor() -> None:
    doc = reference()
    doc["environment"]["pcie"]["theoretical_gbps_per_direction"] = None
    violations = plausibility_violations(doc)
    assert "pcie.curve h2d pinned 1024 MiB p50" in figures(violations)
    assert all("none reported" in v.expected for v in violations)


def test_a_ring_slower_than_launch_and_sync_is_caught() -> None:
    doc = reference()
    stat = metric(doc, "ring", "ring_roundtrip_us")
    scale(stat, 20.0 / stat["p50"])  # 20 us: in range, but slower than a launch
    violations = plausibility_violations(doc)
    assert [v.figure for v in violations] == ["ring.ring_roundtrip_us p50"] * 2
    assert {v.expected.split("'s")[0] for v in violations} == {
        "below launch + sync", "below one launch per request",
    }


def test_a_missing_required_figure_is_named() -> None:
    doc = reference()
    del doc["benchmarks"]["launch"]["metrics"]["launch_sync_roundtrip_us"]
    (v,) = plausibility_violations(doc)
    assert (v.figure, v.value) == ("launch.launch_sync_roundtrip_us p50", None)
    assert str(v).startswith("launch.launch_sync_roundtrip_us p50 = missing")


def test_a_figure_without_a_range_is_named() -> None:
    doc = reference()
    metrics = doc["benchmarks"]["ring"]["metrics"]
    metrics["ring_warp_speed_us"] = copy.deepcopy(metrics["ring_roundtrip_us"])
    assert figures(plausibility_violations(doc)) == {"ring.ring_warp_speed_us p50"}


def test_only_the_benchmarks_that_ran_are_required() -> None:
    doc = reference()
    del doc["benchmarks"]["ring"], doc["benchmarks"]["pcie"]
    assert plausibility_violations(doc) == []
