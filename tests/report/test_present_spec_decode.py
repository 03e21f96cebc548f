"""The report's Speculative decoding section (report/present_spec_decode.py)."""

from __future__ import annotations

import math

import pytest

from zerohop.analysis.latency.spec_decode import SpecDecodeSummary
from zerohop.report.present_spec_decode import spec_decode_section

pytestmark = pytest.mark.unit


def _summary(**counts: float) -> SpecDecodeSummary:
    fields = dict(drafts=100.0, draft_tokens=400.0, accepted_tokens=180.0,
                  per_position=(0.7, 0.5, 0.4, 0.2), server_accept_rate=math.nan,
                  server_accept_length=math.nan, requests=40, tokens_per_read_p50=2.0,
                  tokens_per_read_p90=3.0, tokens_per_read_mean=2.25,
                  tokens_per_read_pooled=2.2)
    return SpecDecodeSummary(**{**fields, **counts})  # type: ignore[arg-type]


def test_vllms_counters_give_the_rate_the_mean_and_each_position() -> None:
    section = spec_decode_section(_summary())
    assert section is not None
    assert (section["acceptance_rate"], section["accepted_per_draft"], section["drafts"]) == (
        "45.0 %", "1.8", "100")
    assert [p["share"] for p in section["positions"]] == ["70.0 %", "50.0 %", "40.0 %",
                                                          "20.0 %"]
    assert section["per_draft_label"] == "accepted tokens per draft"


def test_sglangs_gauges_stand_in_when_there_are_no_counters() -> None:
    section = spec_decode_section(_summary(
        drafts=math.nan, draft_tokens=math.nan, accepted_tokens=math.nan, per_position=(),
        server_accept_rate=0.62, server_accept_length=2.9))
    assert section is not None
    assert (section["acceptance_rate"], section["accepted_per_draft"], section["drafts"],
            section["positions"]) == ("62.0 %", "2.9", None, [])
    assert "gauges" in section["source"]
    assert spec_decode_section(None) is None
