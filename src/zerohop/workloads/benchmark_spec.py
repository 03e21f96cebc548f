"""A benchmark in one line: `zerohop run --input-tokens 1000 --output-tokens 200 --rate 10
--requests 500` turned into an ordinary workload spec, validated by the same models as a
YAML file, so the run that follows is the one a file would have started (the same
prompt sizing through the target's tokenizer, the same load, the same records).

A length is `N` (fixed) or a distribution: `uniform:MIN,MAX`, `normal:MEAN,STD`,
`lognormal:MEDIAN,SIGMA`. `--dataset` picks where lengths and arrivals come from:
`random` (the lengths asked), `azure` or `mooncake` (the trace slices shipped in the
package: their lengths and, without --rate or --users, their arrival times), or a file
of your own: `.json` ShareGPT conversations, `.jsonl` Mooncake-style lines
(`timestamp`, `input_length`, `output_length`), `.csv` Azure-style rows. zerohop sends
generated words at each request's length, never a dataset's text. Pure: the CLI writes
the spec to a file (`cli/benchmark_workload.py`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zerohop.core.apis import api_spec
from zerohop.workloads.yaml_io import parse_workloads

BENCHMARK_NAME = "benchmark"
DEFAULT_INPUT_TOKENS = 1024  # as `vllm bench serve --random-input-len`
DEFAULT_OUTPUT_TOKENS = 128  # as `--random-output-len`
SHIPPED_TRACES = {
    "azure": "${ZEROHOP_DATA}/traces/azure_conv_first3600.csv",
    "mooncake": "${ZEROHOP_DATA}/traces/mooncake_conversation_first200s.jsonl",
}
FILE_FORMATS = {".json": "sharegpt_json", ".jsonl": "mooncake_jsonl", ".csv": "azure_csv"}
DATASET_HELP = ("Where lengths (and arrivals) come from: random (--input-tokens, "
                "--output-tokens), azure or mooncake (shipped trace slices), or a file: "
                ".json ShareGPT, .jsonl Mooncake-style lengths, .csv Azure-style rows.")
LENGTH_HELP = ("{what} in tokens: N, uniform:MIN,MAX, normal:MEAN,STD or "
               "lognormal:MEDIAN,SIGMA; a benchmark without a workload file.")
_NUMBER = r"\s*(\d+(?:\.\d+)?)\s*"
LENGTH_SHAPES = {"uniform": ("min", "max"), "normal": ("mean", "std"),
                 "lognormal": ("median", "sigma")}


@dataclass(frozen=True)
class BenchmarkAsk:
    """The one-line benchmark's flags, as given."""

    input_tokens: str | None
    output_tokens: str | None
    dataset: str | None
    rate: float | None
    users: int | None
    api: str


def asked(ask: BenchmarkAsk) -> bool:
    """Did the flags ask for a one-line benchmark (rather than the workload files)?"""
    return any(v is not None for v in (ask.input_tokens, ask.output_tokens, ask.dataset))


def benchmark_document(ask: BenchmarkAsk) -> dict[str, Any]:
    """The workload spec (as YAML data) the flags describe, validated; ValueError in one
    line naming the flag when they do not make one."""
    dataset = ask.dataset or "random"
    if dataset == "random":
        spec: dict[str, Any] = {
            "kind": "short_query_flood",
            "input_tokens": parse_length(ask.input_tokens, "--input-tokens",
                                         DEFAULT_INPUT_TOKENS),
            "max_tokens": parse_length(ask.output_tokens, "--output-tokens",
                                       DEFAULT_OUTPUT_TOKENS),
        }
    else:
        for flag, value in (("--input-tokens", ask.input_tokens),
                            ("--output-tokens", ask.output_tokens)):
            if value is not None:
                raise ValueError(f"{flag}: --dataset {dataset} sets the lengths itself "
                                 "(use --dataset random to choose them)")
        spec = {"kind": "trace_replay", **_trace_source(dataset)}
    spec = {"name": BENCHMARK_NAME, "weight": 1, **spec, "ignore_eos": True,
            "load": _load(ask, spec)}
    try:
        parse_workloads(spec, source="the benchmark flags")
    except ValueError as exc:  # WorkloadError: one line naming the field
        raise ValueError(str(exc)) from None
    return spec


def parse_length(text: str | None, flag: str, default: int) -> int | dict[str, Any]:
    """`1000` → 1000; `normal:1000,100` → {type: normal, mean: 1000, std: 100}; ..."""
    if text is None:
        return default
    fixed = re.fullmatch(r"\s*(\d+)\s*", text)
    if fixed:
        value = int(fixed.group(1))
        if value < 1:
            raise ValueError(f"{flag}: {value} tokens: a length must be at least 1")
        return value
    kind, _, rest = text.partition(":")
    names = LENGTH_SHAPES.get(kind.strip())
    numbers = re.fullmatch(f"{_NUMBER},{_NUMBER}", rest)
    if names is None or numbers is None:
        raise ValueError(f"{flag}: {text!r} is not N, uniform:MIN,MAX, normal:MEAN,STD or "
                         "lognormal:MEDIAN,SIGMA")
    first, second = float(numbers.group(1)), float(numbers.group(2))
    if first <= 0 or second < 0:
        raise ValueError(f"{flag}: {text!r}: the first number must be > 0, the second >= 0")
    if kind.strip() == "uniform":
        if not (first.is_integer() and second.is_integer()) or first > second:
            raise ValueError(f"{flag}: {text!r}: uniform takes whole MIN <= MAX")
        return {"type": "uniform", "min": int(first), "max": int(second)}
    return {"type": kind.strip(), names[0]: first, names[1]: second}


def ignore_eos_note(ask: BenchmarkAsk) -> str | None:
    """One line where the API cannot hold answers to --output-tokens."""
    if ask.output_tokens is None or api_spec(ask.api).ignore_eos:
        return None
    return (f"--api {ask.api} has no ignore_eos: an answer may end before --output-tokens "
            "(each record's output_tokens says how long it was)")


def _trace_source(dataset: str) -> dict[str, Any]:
    if dataset in SHIPPED_TRACES:
        return {"trace": SHIPPED_TRACES[dataset]}
    if dataset == "sharegpt":
        raise ValueError("--dataset sharegpt: no ShareGPT file ships with zerohop; give your "
                         "copy's path, e.g. --dataset ShareGPT_V3_unfiltered_cleaned_split.json")
    path = Path(dataset).expanduser()
    fmt = FILE_FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise ValueError(f"--dataset: {dataset!r} is not random, azure, mooncake or a "
                         ".json / .jsonl / .csv file")
    if not path.is_file():
        raise ValueError(f"--dataset: {path}: no such file")
    return {"trace": str(path.resolve()), "format": fmt}


def _load(ask: BenchmarkAsk, spec: dict[str, Any]) -> dict[str, Any]:
    """The flags' load (the run's --rate and --users override it again, as for any
    file): a rate is open loop, users closed; neither: a trace's own timestamps, else
    one user (ShareGPT has no timestamps)."""
    if ask.rate is not None and ask.rate > 0:  # else `zerohop run` refuses the rate itself
        return {"kind": "open", "rate_rps": ask.rate}
    if ask.users is not None and ask.users > 0:
        return {"kind": "closed", "users": ask.users}
    timed = spec["kind"] == "trace_replay" and spec.get("format") != "sharegpt_json"
    return {"kind": "trace"} if timed else {"kind": "closed", "users": 1}
