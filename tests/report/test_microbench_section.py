from __future__ import annotations

import math

import pytest

from tests.synthetic_runs import microbench_doc
from zerohop.analysis.server.microbench import summarise_microbench

pytestmark = pytest.mark.unit


def test_schema_v1_document() -> None:
    summary = summarise_microbench(microbench_doc())
    assert summary.status == "ok"
    assert [b.name for b in summary.benchmarks] == ["launch", "ring", "pcie"]
    launch = summary.benchmarks[0]
    assert launch.stats[0].metric == "async_launch_us" and launch.stats[0].figures["median"] == 2.1
    assert summary.benchmarks[1].status == "skipped" and summary.benchmarks[1].reason
    assert summary.link_gbps_per_direction == 63.0
    assert len(summary.curve) == 27
    assert summary.curve[0].gbps > 0 and summary.notes == []


def test_a_skipped_or_garbled_document_becomes_notes_not_errors() -> None:
    skipped = summarise_microbench(
        {
            "schema": "zerohop.microbench",
            "schema_version": 1,
            "status": "skipped",
            "reason": "no CUDA device found: cudaErrorNoDevice",
            "benchmarks": {},
        }
    )
    assert skipped.status == "skipped" and "no CUDA" in (skipped.reason or "")
    garbled = summarise_microbench(
        {
            "schema": "zerohop.microbench",
            "schema_version": 9,
            "environment": "?",
            "benchmarks": {"launch": [1], "pcie": {"metrics": {"x": 3}, "curve": "nope"}},
        }
    )
    assert any("schema_version 9" in n for n in garbled.notes)
    assert any("launch" in n for n in garbled.notes)
    assert any("pcie.x" in n for n in garbled.notes)
    assert math.isnan(garbled.link_gbps_per_direction)
