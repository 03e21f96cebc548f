"""The one-line benchmark's workload file: the spec `workloads.benchmark_spec` builds
from `--input-tokens`, `--output-tokens` and `--dataset`, written where the run's Locust
process reads it, as any workload file, and kept for a rerun with `--workload`."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import click
import yaml

from zerohop.core.apis import DEFAULT_API
from zerohop.workloads.benchmark_spec import (
    BenchmarkAsk,
    asked,
    benchmark_document,
    ignore_eos_note,
)

SPEC_FOLDER = ".benchmarks"  # under --results-dir; a dot keeps it out of run listings


def benchmark_workloads(kw: dict[str, Any]) -> list[Path]:
    """[the written spec] when the flags ask for a one-line benchmark, else []; a
    ValueError in one line when they cannot make one."""
    ask = BenchmarkAsk(input_tokens=kw.get("input_tokens"), output_tokens=kw.get("output_tokens"),
                       dataset=kw.get("dataset"), rate=kw.get("rate"), users=kw.get("users"),
                       api=kw.get("api") or DEFAULT_API)
    if not asked(ask):
        return []
    if kw["workloads"] or kw["classes"]:
        raise ValueError("--input-tokens, --output-tokens and --dataset describe the "
                         "workload themselves: leave out --workload and --only")
    text = yaml.safe_dump(benchmark_document(ask), sort_keys=False)
    folder = Path(kw["results_dir"]) / SPEC_FOLDER
    path = folder / f"benchmark-{hashlib.sha256(text.encode()).hexdigest()[:12]}.yaml"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"--results-dir: cannot write {path}: {exc.strerror}") from None
    note = ignore_eos_note(ask)
    if note is not None:
        click.echo(f"zerohop: note: {note}", err=True)
    return [path]
