"""The one-line benchmark's flags become an ordinary workload spec: each length syntax,
each dataset and load, and a bad value refused in one line naming its flag."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from zerohop.cli.benchmark_workload import benchmark_workloads
from zerohop.workloads.benchmark_spec import (
    BenchmarkAsk,
    benchmark_document,
    ignore_eos_note,
    parse_length,
)
from zerohop.workloads.inputs import load_workloads
from zerohop.workloads.schema.distributions import FixedDist, NormalDist
from zerohop.workloads.schema.load_spec import ClosedLoad, OpenLoad, TraceLoad

pytestmark = pytest.mark.unit


def ask(**given: Any) -> BenchmarkAsk:
    fields: dict[str, Any] = {"input_tokens": None, "output_tokens": None, "dataset": None,
                              "rate": None, "users": None, "api": "openai-chat"}
    return BenchmarkAsk(**{**fields, **given})


@pytest.mark.parametrize(("text", "length"), [
    ("1000", 1000),
    (" 200 ", 200),
    ("uniform:800,1200", {"type": "uniform", "min": 800, "max": 1200}),
    ("normal:1000,100", {"type": "normal", "mean": 1000.0, "std": 100.0}),
    ("lognormal:1000,0.5", {"type": "lognormal", "median": 1000.0, "sigma": 0.5}),
])
def test_each_length_syntax(text: str, length: Any) -> None:
    assert parse_length(text, "--input-tokens", 1) == length


@pytest.mark.parametrize("text", ["0", "-5", "1e3", "normal:1000", "poisson:3,4",
                                  "uniform:5,3", "uniform:1.5,3", "normal:0,10", ""])
def test_a_bad_length_is_one_line_naming_its_flag(text: str) -> None:
    with pytest.raises(ValueError, match=r"^--output-tokens: ") as caught:
        parse_length(text, "--output-tokens", 1)
    assert "\n" not in str(caught.value)


def write(tmp_path: Path, **given: Any) -> Any:
    kw = {"input_tokens": None, "output_tokens": None, "dataset": None, "rate": None,
          "users": None, "api": "openai-chat", "workloads": (), "classes": (),
          "results_dir": tmp_path, **given}
    [path] = benchmark_workloads(kw)
    [spec] = load_workloads([path])
    return spec


def test_fixed_lengths_at_a_rate_are_an_open_loop_workload(tmp_path: Path) -> None:
    spec = write(tmp_path, input_tokens="1000", output_tokens="200", rate=10.0)
    assert spec.kind == "short_query_flood" and spec.name == "benchmark"
    assert spec.input_tokens == FixedDist(type="fixed", value=1000)
    assert spec.max_tokens == FixedDist(type="fixed", value=200)
    assert spec.ignore_eos is True
    assert isinstance(spec.load, OpenLoad) and spec.load.rate_rps == 10.0


def test_users_make_it_closed_and_a_distribution_stays_one(tmp_path: Path) -> None:
    spec = write(tmp_path, input_tokens="normal:1000,100", users=16)
    assert spec.input_tokens == NormalDist(type="normal", mean=1000.0, std=100.0)
    assert spec.max_tokens == FixedDist(type="fixed", value=128)  # vLLM's default
    assert isinstance(spec.load, ClosedLoad) and spec.load.users == 16


@pytest.mark.parametrize(("dataset", "fmt"), [("azure", "azure_csv"),
                                              ("mooncake", "mooncake_jsonl")])
def test_a_shipped_trace_keeps_its_timestamps(tmp_path: Path, dataset: str, fmt: str) -> None:
    spec = write(tmp_path, dataset=dataset)
    assert spec.kind == "trace_replay" and spec.resolved_format == fmt
    assert spec.trace.is_file() and isinstance(spec.load, TraceLoad)


def test_a_users_sharegpt_file_runs_closed(tmp_path: Path) -> None:
    data = tmp_path / "mine.json"
    data.write_text('[{"conversations": [{"from": "human", "value": "hi there"},'
                    ' {"from": "gpt", "value": "hello"}]}]')
    spec = write(tmp_path, dataset=str(data))
    assert spec.resolved_format == "sharegpt_json" and isinstance(spec.load, ClosedLoad)


@pytest.mark.parametrize(("given", "start"), [
    ({"dataset": "azure", "input_tokens": "100"}, "--input-tokens: --dataset azure sets"),
    ({"dataset": "sharegpt"}, "--dataset sharegpt: no ShareGPT file ships"),
    ({"dataset": "prompts.txt"}, "--dataset: 'prompts.txt' is not"),
    ({"dataset": "missing.jsonl"}, "--dataset: "),
])
def test_a_dataset_that_cannot_run_is_one_line(given: dict[str, Any], start: str) -> None:
    with pytest.raises(ValueError) as caught:
        benchmark_document(ask(**given))
    assert str(caught.value).startswith(start) and "\n" not in str(caught.value)


def test_the_flags_do_not_mix_with_workload_files(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="leave out --workload"):
        write(tmp_path, input_tokens="10", workloads=(Path("workloads/all.yaml"),))


def test_the_same_flags_write_the_same_file(tmp_path: Path) -> None:
    kw = {"input_tokens": "10", "output_tokens": None, "dataset": None, "rate": None,
          "users": None, "api": "openai-chat", "workloads": (), "classes": (),
          "results_dir": tmp_path}
    assert benchmark_workloads(kw) == benchmark_workloads(dict(kw))
    assert benchmark_workloads({**kw, "input_tokens": "11"}) != benchmark_workloads(kw)


def test_ignore_eos_is_said_where_the_api_has_none() -> None:
    assert ignore_eos_note(ask(output_tokens="200")) is None
    note = ignore_eos_note(ask(output_tokens="200", api="anthropic"))
    assert note is not None and note.startswith("--api anthropic has no ignore_eos")
