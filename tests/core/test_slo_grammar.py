"""One SLO grammar: `--slo` text, a run's manifest and a workload's `slo` block parse
to the same objectives; bad text is a one-line error naming the bad part (exit 2 on
the command line), and a finished run's report notes it instead of failing."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from zerohop.analysis.latency.slo import good_mask, parse_slos
from zerohop.analysis.run_data import frame_from_rows
from zerohop.cli import cli
from zerohop.core.slo import (
    SloError,
    SloTarget,
    parse_slo_mapping,
    parse_slo_text,
    request_meets,
    slo_text,
)
from zerohop.loadgen.options import parse_slo

pytestmark = pytest.mark.unit

TEXTS = [
    "",
    "ttft_p99_ms=500,tpot_p99_ms=50",
    " ttft_p999_ms = 900 , e2e_p99_9_ms=2000,itl_max_ms=80,",
    "tpot_mean_ms=20,ttft_from_schedule_p99_ms=700,e2e_from_schedule_p50_ms=1e3",
    "ttft_ms=500,e2e_ms=2000,tpot_p5_ms=0.25",
]


@pytest.mark.parametrize("text", TEXTS)
def test_the_cli_path_and_the_report_path_parse_the_same(text: str) -> None:
    targets = parse_slo_text(text)
    manifest_slo = json.loads(json.dumps(parse_slo(text)))  # --slo → manifest.json
    from_report, notes = parse_slos(manifest_slo)  # manifest.json → the report
    assert from_report == targets and notes == []
    assert parse_slo_mapping(manifest_slo) == targets  # a workload's slo block
    assert parse_slo_text(slo_text(targets)) == targets  # what `run` hands to Locust


@pytest.mark.parametrize(
    ("key", "column", "statistic"),
    [
        ("ttft_p99_ms", "ttft_ms", "p99"),
        ("ttft_p999_ms", "ttft_ms", "p99.9"),
        ("ttft_p99_9_ms", "ttft_ms", "p99.9"),
        ("ttft_p99.9_ms", "ttft_ms", "p99.9"),
        ("tpot_p995_ms", "tpot_ms", "p99.5"),
        ("tpot_p50_ms", "tpot_ms", "p50"),
        ("itl_p5_ms", "itl_ms", "p5"),
        ("e2e_p100_ms", "e2e_ms", "max"),
        ("e2e_mean_ms", "e2e_ms", "mean"),
        ("e2e_ms", "e2e_ms", "max"),
        ("ttft_from_schedule_p99_ms", "ttft_from_schedule_ms", "p99"),
        ("e2e_from_schedule_ms", "e2e_from_schedule_ms", "max"),
    ],
)
def test_key_forms(key: str, column: str, statistic: str) -> None:
    assert parse_slo_text(f"{key}=5") == [SloTarget(key, column, statistic, 5.0)]


BAD = [
    ("ttft_p99_ms", "'ttft_p99_ms' is not NAME=VALUE"),
    ("=5", "'=5' is not NAME=VALUE"),
    ("ttft_p99=5", "'ttft_p99' is not like ttft_p99_ms"),
    ("_ms=5", "'_ms' is not like"),
    ("latency_p99_ms=5", "unknown metric 'latency' (ttft, tpot, itl, e2e, ttft_from_schedule"),
    ("speed_ms=5", "unknown metric 'speed'"),
    ("schedule_lag_p99_ms=5", "unknown metric 'schedule_lag'"),
    ("ttft_q99_ms=5", "unknown statistic 'q99'"),
    ("ttft__ms=5", "unknown statistic ''"),
    ("ttft_p0_ms=5", "percentile 0 is not in (0, 100]"),
    ("ttft_p99_ms=fast", "ttft_p99_ms='fast' is not a number of ms"),
    ("ttft_p99_ms=", "ttft_p99_ms='' is not a number of ms"),
    ("ttft_p99_ms=-1", "ttft_p99_ms must be a positive number of ms (got -1)"),
    ("ttft_p99_ms=0", "must be a positive number"),
    ("ttft_p99_ms=nan", "must be a positive number"),
    ("ttft_p99_ms=inf", "must be a positive number"),
    ("ttft_p999_ms=5,ttft_p99.9_ms=6", "'ttft_p99.9_ms' repeats 'ttft_p999_ms'"),
    ("e2e_ms=5,e2e_max_ms=6", "'e2e_max_ms' repeats 'e2e_ms'"),
    ("tpot_p50_ms=5,ttft_p99_ms=x", "ttft_p99_ms='x'"),
]


@pytest.mark.parametrize(("text", "fragment"), BAD)
def test_bad_text_is_a_one_line_error_naming_the_bad_part(text: str, fragment: str) -> None:
    with pytest.raises(SloError) as caught:
        parse_slo(text)
    message = str(caught.value)
    assert isinstance(caught.value, ValueError)
    assert message.startswith("--slo: ") and "\n" not in message
    assert fragment in message, message


@pytest.mark.parametrize(
    "text",
    ["ttft_p99=5", "latency_p99_ms=5", "ttft_p0_ms=5", "ttft_p99_ms=-1", "e2e_ms=1,e2e_p100_ms=2"],
)
def test_the_command_line_exits_2_with_the_message(text: str, tmp_path: Path) -> None:
    with pytest.raises(SloError) as caught:
        parse_slo(text)
    result = CliRunner().invoke(cli, ["capacity", str(tmp_path), "--slo", text])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert result.output.strip() == f"zerohop: error: {caught.value}"


def test_the_report_notes_what_the_cli_refuses_in_the_same_words() -> None:
    manifest_slo = {"ttft_p999_ms": 900, "bogus": 3, "tpot_p0_ms": 5, "e2e_p99_ms": -1,
                    "ttft_p99.9_ms": 800, "itl_p99_ms": True}
    targets, notes = parse_slos(manifest_slo)
    assert targets == [SloTarget("ttft_p999_ms", "ttft_ms", "p99.9", 900.0)]
    expected = []
    for key, value in list(manifest_slo.items())[1:]:
        with pytest.raises(SloError) as caught:
            parse_slo(f"ttft_p999_ms=900,{key}={value}")
        expected.append(str(caught.value).replace("--slo", "SLO", 1) + ": ignored")
    assert notes[:4] == expected[:4]
    assert notes[4] == "SLO: itl_p99_ms=True is not a number of ms: ignored"  # not text here


def test_a_request_meets_every_threshold_and_missing_values_pass() -> None:
    slo = parse_slo_mapping({"ttft_ms": 100, "e2e_ms": 1000})
    assert request_meets(slo, {"ttft_ms": 99, "tpot_ms": None, "e2e_ms": 1000})
    assert not request_meets(slo, {"ttft_ms": 101, "tpot_ms": None, "e2e_ms": 10})
    assert not request_meets(slo, {"ttft_ms": 1, "tpot_ms": 5, "e2e_ms": 1001})
    assert request_meets(slo, {"ttft_ms": float("nan")})  # no value: not applicable


def test_goodput_counts_the_requests_request_meets_accepts() -> None:
    cases: list[tuple[float, float | None, list[float]]] = [
        (10.0, 5.0, [1.0, 2.0]), (60.0, 5.0, [1.0]), (10.0, None, []),
        (10.0, 9.0, [1.0]), (10.0, 5.0, [1.0, 30.0]),
    ]
    rows = [
        {"request_id": f"r{i}", "workload": "a", "outcome": "ok", "ttft_ms": ttft,
         "tpot_ms": tpot, "e2e_ms": 100.0, "itl_ms": gaps}
        for i, (ttft, tpot, gaps) in enumerate(cases)
    ]
    frame, itl = frame_from_rows(rows)
    targets = parse_slo_text("ttft_p99_ms=50,tpot_mean_ms=8,itl_ms=20")
    expected = [
        request_meets(targets, {"ttft_ms": ttft, "tpot_ms": tpot,
                                "itl_ms": max(gaps, default=None)})
        for ttft, tpot, gaps in cases
    ]
    assert expected == [True, False, True, False, False]
    assert good_mask(frame, itl, targets).tolist() == expected
    assert np.array_equal(good_mask(frame, itl, []), np.ones(len(rows), dtype=bool))


def test_ttfo_is_a_latency_an_slo_may_name() -> None:
    """The first answer token after reasoning: `ttfo_p99_ms` judges it like TTFT."""
    (target,) = parse_slo_text("ttfo_p99_ms=800")
    assert (target.column, target.statistic, target.threshold_ms) == ("ttfo_ms", "p99", 800.0)
    rows = [
        {"request_id": f"r{i}", "workload": "a", "outcome": "ok", "ttft_ms": 10.0,
         "ttfo_ms": ttfo, "e2e_ms": 900.0, "itl_ms": []}
        for i, ttfo in enumerate([300.0, 900.0])
    ]
    frame, itl = frame_from_rows(rows)
    assert good_mask(frame, itl, [target]).tolist() == [True, False]
