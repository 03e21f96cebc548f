"""The metric catalogue is the one place request metrics are defined: every metric the
report, the comparison and the nightly gates show is in it, the glossary prints its
definition, and no other module writes its own list of metric names. Nor of the record's
columns: their types come from the record's schema (core/records.py), not a table."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from pydantic import ValidationError

import zerohop
from tests.run_fixtures import RunFactory
from zerohop.analysis.comparison.compare import CompareSettings, compare_runs
from zerohop.analysis.run_analysis import analyse_run
from zerohop.core import records
from zerohop.core.metrics import (
    CATALOGUE,
    LAYER_METRICS,
    METRICS,
    NIGHTLY_GATES,
    REQUEST_LATENCIES,
    SCHEDULE_LATENCIES,
    SLO_METRICS,
    WINDOW_PERCENTILES,
    window_column,
)
from zerohop.planning.nightly import CompareConfig
from zerohop.report.glossary import glossary_entries
from zerohop.report.present import report_page
from zerohop.report.present_compare import COMPARE_GLOSSARY_TERMS, comparison_page
from zerohop.report.present_latency import ITL_BETWEEN_READS, ITL_EVERY_GAP
from zerohop.storage.run_reader import load_run

pytestmark = pytest.mark.unit

SRC = Path(zerohop.__file__).resolve().parent
CATALOGUE_FILE = "core/metrics.py"
# The embedded target names the metric families of the server it imitates, not ours.
NOT_SCANNED = ("sim/",)
WINDOW_COLUMNS = frozenset(window_column(name, stat) for name, stat in WINDOW_PERCENTILES)
STEMS = frozenset(m.stem for m in CATALOGUE if m.name.endswith("_ms"))  # as SLO keys spell them
VOCABULARY = frozenset(METRICS) | WINDOW_COLUMNS | STEMS
TITLES = frozenset(m.title for m in CATALOGUE)
MIN_NAMES = 3  # two names together are a lookup or a pair; three are a list
RECORD_FILE = "core/records.py"  # the record's schema: its fields, each with its entry
# A module may name the few record columns it reads (selfcheck's timing columns are 7);
# eight or more in one literal is a copy of the schema (the type tables had 14 and 17).
MIN_SCHEMA_NAMES = 8


# --- the scan: literal collections of metric names ----------------------------------------
def metric_lists(source: str, vocabulary: frozenset[str] = VOCABULARY,
                 min_names: int = MIN_NAMES) -> list[tuple[int, str, list[str]]]:
    """(line, assigned name, metric names) of each literal collection — a tuple, list or
    set of names, or a table keyed by them with literal values, nested ones included —
    that holds at least `min_names` distinct names of `vocabulary` (by default catalogue
    names, their stems or window columns)."""
    tree = ast.parse(source)
    owner: dict[int, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            name = next((t.id for t in targets if isinstance(t, ast.Name)), "")
            for sub in ast.walk(node.value):
                owner.setdefault(id(sub), name)
    seen: set[int] = set()
    found = []
    for node in ast.walk(tree):
        if id(node) in seen or not isinstance(node, ast.Tuple | ast.List | ast.Set | ast.Dict):
            continue
        names = _names_in(node, seen, vocabulary)
        if len(names) >= min_names:
            found.append((node.lineno, owner.get(id(node), ""), sorted(names)))
    return found


def _names_in(node: ast.AST, seen: set[int], vocabulary: frozenset[str]) -> set[str]:
    seen.add(id(node))
    if isinstance(node, ast.Constant):
        return {node.value} & vocabulary if isinstance(node.value, str) else set()
    if isinstance(node, ast.Starred):
        return _names_in(node.value, seen, vocabulary)
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return set().union(*(_names_in(e, seen, vocabulary) for e in node.elts))
    if isinstance(node, ast.Dict):  # keys count only in a table (literal values), not a row
        names: set[str] = set()
        for key, value in zip(node.keys, node.values, strict=True):
            if key is not None and _is_literal(value):
                names |= _names_in(key, seen, vocabulary)
            names |= _names_in(value, seen, vocabulary)
        return names
    return set()


def _is_literal(node: ast.AST) -> bool:
    try:
        ast.literal_eval(node)
    except ValueError:
        return False
    return True


def _package_metric_lists(vocabulary: frozenset[str] = VOCABULARY, home: str = CATALOGUE_FILE,
                          min_names: int = MIN_NAMES) -> list[tuple[str, int, str, list[str]]]:
    return [
        (path.relative_to(SRC).as_posix(), line, name, names)
        for path in sorted(SRC.rglob("*.py"))
        if path.relative_to(SRC).as_posix() != home
        and not path.relative_to(SRC).as_posix().startswith(NOT_SCANNED)
        for line, name, names in metric_lists(path.read_text("utf-8"), vocabulary, min_names)
    ]


@pytest.mark.parametrize(
    ("source", "flagged"),
    [
        ('COLUMNS = ("ttft_ms", "tpot_ms", "e2e_ms")', True),
        ('TITLES = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "itl_ms": "ITL"}', True),
        ('WINDOWS = (("ttft_ms", "p50", 0.5), ("tpot_ms", "p99", 0.99), ("e2e_ms", "p99", 1))',
         True),
        ('NAMES = {"ttft_p50_ms": "p50", "ttft_p99_ms": "p99", "e2e_p99_ms": "p99 E2E"}', True),
        ('Name = Literal["ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"]', True),
        ('for metric, label in (("ttft_ms", "T"), ("tpot_ms", "P"), ("e2e_ms", "E")): pass', True),
        ('LAYER = ("ttft_ms", "e2e_ms")', False),
        ('row = {"req_per_s": f(s), "error_pct": g(s), "good_fraction": h(s)}', False),
        ('SLO_METRICS = ("ttft_from_schedule", "ttft", "tpot", "e2e")', True),
        ('TITLES = ("TTFT", "TPOT", "E2E")', False),
    ],
)
def test_the_scan_finds_metric_lists_and_only_them(source: str, flagged: bool) -> None:
    assert bool(metric_lists(source)) is flagged


def test_no_module_writes_its_own_list_of_metrics() -> None:
    stray = [
        f"{path}:{line} {name or '(unnamed literal)'}: {', '.join(names)}"
        for path, line, name, names in _package_metric_lists()
    ]
    assert not stray, (
        "metric lists outside core/metrics.py (derive them from the catalogue):\n"
        + "\n".join(stray)
    )


def test_the_record_scan_finds_a_column_type_table() -> None:
    table = ('_FLOAT = {"scheduled_ts", "sent_ts", "end_ts", "ttft_ms", "e2e_ms", "tpot_ms",'
             ' "ttfo_ms", "backoff_ms"}')
    fields = frozenset(records.RECORD_FIELDS)
    assert metric_lists(table, fields, MIN_SCHEMA_NAMES)
    assert not metric_lists('NEEDED = ("sent_ts", "end_ts", "outcome")', fields,
                            MIN_SCHEMA_NAMES)


def test_no_module_writes_its_own_list_of_record_columns() -> None:
    """A column-type table (`_FLOAT = {"ttft_ms", "sent_ts", ...}`) or a list of the
    columns a reader takes is a second copy of the record's schema: derive it from
    `records.RECORD_COLUMNS` instead."""
    stray = [
        f"{path}:{line} {name or '(unnamed literal)'}: {', '.join(names)}"
        for path, line, name, names in _package_metric_lists(
            frozenset(records.RECORD_FIELDS), RECORD_FILE, MIN_SCHEMA_NAMES)
    ]
    assert not stray, (
        "record-column lists outside core/records.py (derive them from RECORD_COLUMNS):\n"
        + "\n".join(stray)
    )


# --- the catalogue itself -------------------------------------------------------------------
def test_the_catalogue_is_consistent() -> None:
    assert len(METRICS) == len(CATALOGUE)
    assert len(TITLES) == len(CATALOGUE)
    assert len({m.glossary_term for m in CATALOGUE}) == len(CATALOGUE)
    for m in CATALOGUE:
        assert m.better in ("lower", "higher", "neither") and m.description.endswith(".")
        if m.slo or m.window_stats or m.layer or m.gated:
            assert m.unit == "ms" and m.name.endswith("_ms") and m.better == "lower", m.name
    assert REQUEST_LATENCIES == ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms")
    assert set(LAYER_METRICS) | set(NIGHTLY_GATES) <= set(REQUEST_LATENCIES) <= set(SLO_METRICS)
    assert set(SCHEDULE_LATENCIES) <= set(SLO_METRICS)


def test_the_glossary_defines_every_catalogue_metric() -> None:
    glossary = dict(glossary_entries())
    for m in CATALOGUE:
        assert glossary[m.glossary_term] == m.description


# --- what the pages show ---------------------------------------------------------------------
def test_every_metric_the_report_shows_is_in_the_catalogue(make_run: RunFactory) -> None:
    analysis = analyse_run(load_run(make_run()))  # open loop: schedule latencies too
    page = report_page(analysis, "now")
    assert set(SCHEDULE_LATENCIES) <= set(analysis.total.latency)
    for summary in analysis.summaries:
        assert set(summary.latency) <= set(METRICS)
    assert set(analysis.cdfs) == set(REQUEST_LATENCIES)
    assert set(analysis.charts_series.latency.columns) == WINDOW_COLUMNS
    assert {p.latency for p in analysis.correlation.pairs} <= WINDOW_COLUMNS
    assert {r.target.column for r in analysis.slo_results} <= set(SLO_METRICS)
    shown = {row["metric"] for row in page.context["latency"]["rows"]}
    assert {METRICS[name].title for name in SCHEDULE_LATENCIES} <= shown
    assert shown - {ITL_EVERY_GAP, ITL_BETWEEN_READS} <= TITLES
    headline = [f["label"] for f in page.context["headline"]["figures"]]
    latencies = {label.removesuffix(" p50 / p99") for label in headline if "p50 / p99" in label}
    assert latencies and latencies - {ITL_BETWEEN_READS} <= TITLES


def test_every_metric_compare_and_nightly_judge_is_in_the_catalogue(make_run: RunFactory) -> None:
    direct = load_run(make_run(noise_seed=1, target_kind="embedded", name="direct"))
    layered = load_run(
        make_run(noise_seed=2, target_kind="layer", extra_layer_ms=40.0, name="layered")
    )
    comparison = compare_runs(direct, layered, CompareSettings(n_boot=200))
    assert {m.metric for w in comparison.workloads for m in w.metrics} == set(REQUEST_LATENCIES)
    assert {r.name for w in comparison.workloads for r in w.rates} <= TITLES
    assert {r.metric for b in comparison.layer_budgets for r in b.rows} == set(LAYER_METRICS)
    page = comparison_page([comparison], "now")
    assert [g["term"] for g in page.context["glossary"]] == list(COMPARE_GLOSSARY_TERMS)
    assert CompareConfig().metrics == list(NIGHTLY_GATES)
    assert CompareConfig(metrics=list(REQUEST_LATENCIES)).metrics == list(REQUEST_LATENCIES)
    with pytest.raises(ValidationError, match="schedule_lag_ms"):
        CompareConfig(metrics=["schedule_lag_ms"])
