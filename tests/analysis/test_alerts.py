from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from zerohop.analysis.server.alerts import (
    AlertRuleError,
    evaluate_rules,
    load_rules,
    load_rules_file,
    parse_rule,
    sustained_episodes,
)
from zerohop.analysis.timeseries import Lane

pytestmark = pytest.mark.unit


def test_rule_grammar() -> None:
    rule = parse_rule("pcie_rx_bytes_per_s > 2.75e9 for 10s")
    assert (rule.series, rule.op, rule.threshold, rule.for_s) == (
        "pcie_rx_bytes_per_s",
        ">",
        2.75e9,
        10.0,
    )
    assert parse_rule("pcie_rx_bytes_per_s>2.75G for 500ms").threshold == 2.75e9
    assert parse_rule("gpu_temp_c{gpu=0, host='a'} >= 85 for 2m").labels == {
        "gpu": "0",
        "host": "a",
    }
    assert parse_rule("gpu_temp_c{gpu=0} >= 85 for 2m").for_s == 120.0
    assert parse_rule("kv_cache_usage_frac <= 0.1").for_s == 0.0
    assert parse_rule("ttft_p99_ms > 500 for 1h").text == "ttft_p99_ms > 500 for 3600s"


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("pcie_rx_bytes_per_s >> 1", "expected `SERIES OP NUMBER"),
        ("gpu_temp_c > hot for 10s", "expected `SERIES OP NUMBER"),
        ("gpu_temp_c > 80 for 10 parsecs", "expected `SERIES OP NUMBER"),
        ("gpu_temp_c{gpu} > 80", "label filter 'gpu' is not key=value"),
    ],
)
def test_bad_rules_name_the_rule(text: str, fragment: str) -> None:
    with pytest.raises(AlertRuleError) as caught:
        parse_rule(text)
    assert text in str(caught.value) and fragment in str(caught.value)


def test_mapping_rules_are_validated_with_the_field_named() -> None:
    [rule] = load_rules([{"series": "gpu_power_w", "op": ">", "threshold": 600, "for_s": 5}])
    assert rule.threshold == 600.0
    with pytest.raises(AlertRuleError, match="field 'for_s'"):
        load_rules([{"series": "gpu_power_w", "op": ">", "threshold": 1, "for_s": -1}])
    with pytest.raises(AlertRuleError, match="field 'treshold'"):
        load_rules([{"series": "gpu_power_w", "op": ">", "treshold": 1}])


def test_rules_file(tmp_path: Path) -> None:
    path = tmp_path / "alerts.yaml"
    path.write_text(
        "alerts:\n  - gpu_temp_c > 85 for 30s\n  - {series: queue_depth, op: '>', threshold: 10}\n"
    )
    assert [r.series for r in load_rules_file(path)] == ["gpu_temp_c", "queue_depth"]
    path.write_text("just a string\n")
    with pytest.raises(AlertRuleError, match="expected a list"):
        load_rules_file(path)


def _lane(values: list[float], step: float = 0.1, gpu: str = "0", start: float = 0.0) -> Lane:
    ts = start + np.arange(len(values)) * step
    return Lane(
        f"pcie_rx_bytes_per_s{{gpu={gpu}}}",
        "pcie_rx_bytes_per_s",
        {"gpu": gpu},
        "nvml",
        ts,
        np.array(values, dtype=float),
    )


def test_sustained_condition_fires_and_a_short_spike_does_not() -> None:
    rule = parse_rule("pcie_rx_bytes_per_s > 2.75e9 for 10s")
    high, low = 3e9, 1e9
    sustained = _lane([low] * 50 + [high] * 110 + [low] * 50, gpu="0")  # 11 s above
    spike = _lane([low] * 50 + [high] * 90 + [low] * 50, gpu="1")  # 9 s above
    [result] = evaluate_rules([rule], [sustained, spike], {}, t0=0.0)
    assert result.lanes_checked == 2
    [firing] = result.firings
    assert firing.lane == "pcie_rx_bytes_per_s{gpu=0}"
    assert firing.start_s == pytest.approx(5.0)
    assert firing.duration_s == pytest.approx(11.0)
    assert firing.peak == high


def test_a_hole_in_the_data_breaks_a_streak() -> None:
    rule = parse_rule("pcie_rx_bytes_per_s > 2.75e9 for 10s")
    ts = np.concatenate([np.arange(60) * 0.1, 30.0 + np.arange(60) * 0.1])  # 24 s hole
    lane = Lane("x", "pcie_rx_bytes_per_s", {}, "nvml", ts, np.full(120, 3e9))
    assert sustained_episodes(rule, lane.key, lane.ts, lane.values, 0.0) == []
    rule_short = parse_rule("pcie_rx_bytes_per_s > 2.75e9 for 5s")
    firings = sustained_episodes(rule_short, lane.key, lane.ts, lane.values, 0.0)
    assert [f.start_s for f in firings] == pytest.approx([0.0, 30.0])


def test_label_filter_and_window_series_and_missing_series() -> None:
    lanes = [_lane([3e9] * 200, gpu="0"), _lane([3e9] * 200, gpu="1")]
    rules = load_rules(
        [
            "pcie_rx_bytes_per_s{gpu=1} > 1e9 for 1s",
            "ttft_p99_ms > 500 for 5s",
            "preemptions_per_s > 0",
        ]
    )
    centres = np.arange(10) * 2.0 + 1.0
    window = {
        "ttft_p99_ms": (centres, np.array([100, 600, 700, 100, 600, 700, 800, 900, 100, 100.0]))
    }
    by_gpu, ttft, missing = evaluate_rules(rules, lanes, window, t0=0.0)
    assert [f.lane for f in by_gpu.firings] == ["pcie_rx_bytes_per_s{gpu=1}"]
    assert (
        len(ttft.firings) == 1 and ttft.firings[0].start_s == 9.0
    )  # 2 windows (4 s) are too short, 4 windows (8 s) fire
    assert ttft.firings[0].duration_s == pytest.approx(8.0)
    assert missing.lanes_checked == 0 and not missing.fired
