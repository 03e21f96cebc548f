"""Shared paths for the workload tests: the repo's workloads/ and the public traces.

The public traces sit beside the repository only where CI lays them (../shared/traces) or
where ZEROHOP_TRACES names them: a test that needs one skips, naming it, on a bare clone,
and fails in CI, which sets ZEROHOP_REQUIRE_TRACES=1."""

from __future__ import annotations

import os
from pathlib import Path

from tests.tiers import skip_unless_required

REPO = Path(__file__).resolve().parents[2]
WORKLOADS_DIR = REPO / "workloads"
TRACES_DIR = Path(os.environ.get("ZEROHOP_TRACES") or REPO.parent / "shared" / "traces")


def trace_path(name: str) -> Path:
    path = TRACES_DIR / name
    if not path.is_file():
        skip_unless_required("ZEROHOP_REQUIRE_TRACES",
                             f"public trace {name} not found in {TRACES_DIR} (set ZEROHOP_TRACES)")
    return path
