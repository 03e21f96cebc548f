"""docs/architecture.md and docs/design.md are checked against the code, as
workloads/README.md is against its generator (tests/workloads/test_spec.py): every module
path, every name after a module, every class or constant name, the results folder's
files and the figures below. A module moved or renamed fails here, one line per stale
reference, naming the doc and what it cites."""

from __future__ import annotations

import pytest

from tests.docs.doc_references import (
    REPO,
    broken_references,
    constants_of,
    results_section_problems,
)

DOCS = ("docs/architecture.md", "docs/design.md")

# (doc, what it says, the module, the constant, the value the saying means)
FIGURES: tuple[tuple[str, str, str, str, object], ...] = (
    ("docs/architecture.md", "flushed by the next record after half a second (`FLUSH_INTERVAL_S`)",
     "storage/run_folder", "FLUSH_INTERVAL_S", 0.5),
    ("docs/architecture.md", "by a flush every second (`SEND_INTERVAL_S` in `loadgen/runtime.py`)",
     "loadgen/runtime", "SEND_INTERVAL_S", 1.0),
    ("docs/design.md", "ships its records to the master every second",
     "loadgen/runtime", "SEND_INTERVAL_S", 1.0),
    ("docs/design.md", "parses only the newest 200 lines of each sink per refresh",
     "runner/progress", "TTFT_SAMPLE_LINES", 200),
    ("docs/design.md", "past 50 ms (`RESYNC_NS`)", "sim/engine/engine", "RESYNC_NS", 50_000_000),
    ("docs/design.md", "between 20 µs and `timer_spin_us`", "sim/engine/step_timer", "MIN_LEAD_NS",
     20_000),
    ("docs/design.md", "resolved once per 30 s", "client/http_stream", "RESOLVE_TTL_S", 30.0),
    ("docs/design.md", "p50 = ranks 40–60 %, p90 = 85–95 %, p99 = the top 2 %",
     "analysis/server/time_budget", "BANDS", (("p50", 0.40, 0.60), ("p90", 0.85, 0.95),
                                       ("p99", 0.98, 1.0))),
    ("docs/running.md", "At most 10,000", "loadgen/run_limits", "MAX_WAITING",
     10_000),
    ("docs/design.md", "a band needs 3 requests", "analysis/server/time_budget",
     "MIN_BAND_REQUESTS", 3),
    ("docs/design.md", "| `loadgen_loop_lag_ms` (stat=mean)", "analysis/server/time_budget",
     "LOOP_LAG_METRIC", "loadgen_loop_lag_ms"),
    ("docs/design.md", "a full stop every 12", "workloads/content/prompts",
     "WORDS_PER_SENTENCE", 12),
    ("docs/design.md", "misses the asked size by more than 3 %", "analysis/latency/token_counts",
     "INPUT_ERROR_FLAG_PCT", 3.0),
    ("docs/design.md", "| `tokenize` | the target's", "loadgen/prompt_sizing",
     "SIZED_BY_TOKENIZE", "tokenize"),
    ("docs/design.md", "| `tokenizer` | `--tokenizer PATH`", "loadgen/prompt_sizing",
     "SIZED_BY_TOKENIZER", "tokenizer"),
    ("docs/design.md", "| `usage` | the `usage.prompt_tokens`", "loadgen/prompt_sizing",
     "SIZED_BY_USAGE", "usage"),
    ("docs/design.md", "| `estimate` | the embedded target's", "loadgen/prompt_sizing",
     "SIZED_BY_ESTIMATE", "estimate"),
    ("docs/design.md", "SCHED_FIFO (priority 10", "sim/sim_command", "REALTIME_PRIORITY", 10),
    ("docs/design.md", "in the manifest (`load_stopped_ts`", "core/layout", "LOAD_STOPPED_KEY",
     "load_stopped_ts"),
    ("docs/design.md", "LoRA mixes are refused (exit 2)", "core/exit_codes", "EXIT_BAD_INPUT", 2),
)


def _text(doc: str) -> str:
    return (REPO / doc).read_text(encoding="utf-8")


def figure_problems(figures: tuple[tuple[str, str, str, str, object], ...],
                    texts: dict[str, str]) -> list[str]:
    """One line per figure the doc no longer says, or says but the code no longer has."""
    problems = []
    for doc, saying, module, name, value in figures:
        if saying not in " ".join(texts[doc].split()):
            problems.append(f"{doc}: no longer says {saying!r} (the figure of {module}.{name})")
            continue
        actual = constants_of(tuple(module.split("/"))).get(name)
        if actual != value:
            problems.append(f"{doc}: says {saying!r} but {module}.{name} is {actual!r}")
    return problems


@pytest.mark.unit
@pytest.mark.parametrize("doc", DOCS)
def test_every_reference_of_the_doc_is_in_the_code(doc: str) -> None:
    problems = broken_references(_text(doc), doc)
    assert not problems, "\n" + "\n".join(problems)


@pytest.mark.unit
def test_the_results_folder_section_names_every_file_of_the_layout() -> None:
    problems = results_section_problems(_text("docs/design.md"), "docs/design.md")
    assert not problems, "\n" + "\n".join(problems)


@pytest.mark.unit
def test_the_docs_figures_are_the_codes_constants() -> None:
    problems = figure_problems(FIGURES, {doc: _text(doc) for doc, *_ in FIGURES})
    assert not problems, "\n" + "\n".join(problems)


STALE_DOC = """\
The reader is `storage/run_reader.load_run` (in storage/run_reader.py); records
are `core/records.RequestRecord`, decoded by `measure.StreamDecode`.
Moved: zerohop/client/gone.py, `client/measure.build_recrd`, `analysis.gone.thing`,
`StreamDecodr`, `LagRecorder.add_writen`, `http_strem.stamped_recv`, `FLUSH_INTERVAL_MS`,
`request.parquet`,
tests/client/test_gone.py, `src/zerohop/olddir/`, `report_templates/gone.html.j2`.
Not code: `response.completed`, `usage.prompt_tokens`, `time.perf_counter_ns`,
`config.run_time`, `zerohop run --requests N`.
"""


@pytest.mark.unit
def test_a_stale_doc_is_reported_one_line_per_broken_reference() -> None:
    assert broken_references(STALE_DOC, "stale.md") == [
        "stale.md: `zerohop/client/gone.py`: no such file",
        "stale.md: `tests/client/test_gone.py`: no such file",
        "stale.md: `client/measure.build_recrd`: client/measure defines no build_recrd",
        "stale.md: `analysis.gone.thing`: analysis defines no gone",
        "stale.md: `StreamDecodr`: defined nowhere in src/zerohop",
        "stale.md: `LagRecorder.add_writen`: class LagRecorder has no add_writen",
        "stale.md: `http_strem.stamped_recv`: http_strem is no module or class of src/zerohop",
        "stale.md: `FLUSH_INTERVAL_MS`: defined nowhere in src/zerohop",
        "stale.md: `request.parquet`: not a file of the results folder",
        "stale.md: `src/zerohop/olddir/`: no such path",
        "stale.md: `report_templates/gone.html.j2`: no such path",
    ]


@pytest.mark.unit
def test_a_results_section_that_leaves_out_a_file_or_names_a_stray_one_is_reported() -> None:
    doc = ("## The results folder\n`manifest.json`, `records/*.jsonl`, `requests.parquet`,"
           " `telemetry/*.jsonl`, `telemetry.parquet`, `microbench.json`, `locust.log`,"
           " `report.html`, `summary.json`, `results.csv`, `selfcheck.json`, `plan.json`,"
           " `probe/*.jsonl`, `live/*.jsonl`, `not_sent/*.jsonl`,"
           " `phases.json`, `answers.json`, `stray.json`\n"
           "## Next\n"
           "`ground_truth.jsonl`\n")
    assert results_section_problems(doc, "d.md") == [
        "d.md: results folder: `stray.json` is not in core/layout.py",
        "d.md: results folder: leaves out `ground_truth.jsonl` (core/layout.py)",
    ]


@pytest.mark.unit
def test_a_figure_the_code_changed_or_the_doc_dropped_is_reported() -> None:
    figures = (("a.md", "every half second", "storage/run_folder", "FLUSH_INTERVAL_S", 2.0),
               ("a.md", "every 9 seconds", "storage/run_folder", "FLUSH_INTERVAL_S", 9.0))
    assert figure_problems(figures, {"a.md": "flushed every half\nsecond"}) == [
        "a.md: says 'every half second' but storage/run_folder.FLUSH_INTERVAL_S is 0.5",
        "a.md: no longer says 'every 9 seconds'"
        " (the figure of storage/run_folder.FLUSH_INTERVAL_S)",
    ]
