"""Fixtures shared by the analysis and report tests: synthetic results folders, written once
per session."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.synthetic_runs import SyntheticRun, write_run
from zerohop.core.layout import SUMMARY_FILE

RunFactory = Callable[..., Path]


@pytest.fixture(scope="session")
def make_run(tmp_path_factory: pytest.TempPathFactory) -> RunFactory:
    """`make_run(**SyntheticRun fields)` → a results folder (cached per parameters)."""
    cache: dict[tuple[tuple[str, object], ...], Path] = {}

    def factory(**fields: object) -> Path:
        key = tuple(sorted((k, repr(v)) for k, v in fields.items()))
        if key not in cache:
            root = tmp_path_factory.mktemp("run")
            cache[key] = write_run(root, SyntheticRun(**fields))  # type: ignore[arg-type]
        return cache[key]

    return factory


@pytest.fixture(scope="session")
def hostile_run(make_run: RunFactory) -> Path:
    """A run whose server sent `<script>alert(1)</script>` as an error message and
    whose LoRA mix has an adapter by that name."""
    return make_run(hostile=True, adapters=("a1", "a2", "a3"), name="hostile")


def read_summary(run_dir: Path) -> dict[str, Any]:
    """A results folder's summary.json as written (the product only writes it)."""
    document = json.loads((Path(run_dir) / SUMMARY_FILE).read_text(encoding="utf-8"))
    assert isinstance(document, dict), f"{SUMMARY_FILE}: top level is not an object"
    return document
