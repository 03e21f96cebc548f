"""The report's glossary defines what the page shows: every request metric from the
catalogue, and every telemetry metric in the words of `telemetry.canonical` — the
module that maps the servers' names onto them — never an empty telemetry half."""

from __future__ import annotations

import pytest

from tests.run_fixtures import RunFactory
from zerohop.analysis.run_analysis import analyse_run
from zerohop.analysis.server.correlation import EXCLUDED_METRICS
from zerohop.report.glossary import REQUEST_GLOSSARY, glossary_entries
from zerohop.report.present import report_page
from zerohop.report.present_compare import COMPARE_GLOSSARY_TERMS
from zerohop.report.present_timeseries import (
    FIDELITY_GROUP,
    HIDDEN_METRICS,
    LANE_GROUPS,
    SHORT_METRIC,
)
from zerohop.storage.run_reader import load_run
from zerohop.telemetry.canonical import GLOSSARY, SCALAR_MAP

pytestmark = pytest.mark.unit


def test_every_canonical_telemetry_metric_has_its_canonical_definition() -> None:
    entries = dict(glossary_entries())
    assert GLOSSARY, "telemetry.canonical defines no metric"
    for metric, definition in GLOSSARY.items():
        assert entries.get(metric) == definition, metric


def test_the_report_page_shows_the_canonical_definitions(make_run: RunFactory) -> None:
    page = report_page(analyse_run(load_run(make_run())), "now")
    shown = {g["term"]: g["definition"] for g in page.context["glossary"]}
    assert {m: shown.get(m) for m in GLOSSARY} == GLOSSARY
    assert "vllm:num_requests_waiting" in shown["queue_depth"]  # the server names it maps


def test_every_telemetry_metric_the_report_names_is_canonical() -> None:
    named = {m for group in (*LANE_GROUPS, FIDELITY_GROUP) for m in group.metrics}
    named |= HIDDEN_METRICS | set(SHORT_METRIC) | EXCLUDED_METRICS
    assert named <= set(GLOSSARY), named - set(GLOSSARY)
    assert {m.canonical for m in SCALAR_MAP.values()} <= {t for t, _ in glossary_entries()}


def test_the_compare_glossary_drops_no_term() -> None:
    assert set(COMPARE_GLOSSARY_TERMS) <= set(REQUEST_GLOSSARY)
