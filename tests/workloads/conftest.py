"""Shared paths for the workload tests: the repo's workloads/ and the public traces."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
WORKLOADS_DIR = REPO / "workloads"
TRACES_DIR = Path(os.environ.get("ZEROHOP_TRACES") or REPO.parent / "shared" / "traces")


def trace_path(name: str) -> Path:
    path = TRACES_DIR / name
    if not path.is_file():
        pytest.skip(f"public trace {name} not found in {TRACES_DIR} (set ZEROHOP_TRACES)")
    return path
