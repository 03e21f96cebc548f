"""Fixtures that start the sim in a subprocess (integration tests)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from zerohop.sim.launcher import SimProcess, start_sim

MODEL = "llama-3-8b"  # accepted alias of the default served model


@pytest.fixture(scope="module")
def ground_truth_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("sim") / "ground_truth.jsonl"


@pytest.fixture(scope="module")
def sim(ground_truth_path: Path) -> Iterator[SimProcess]:
    """The default sim (H100 + Llama-3-8B) writing its ground truth to a file."""
    with start_sim(["--seed", "1"], ground_truth=ground_truth_path) as process:
        yield process
