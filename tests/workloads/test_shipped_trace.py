"""The trace slice that ships in the package: small, attributed, a slice (not a copy),
and long enough for the default TraceReplay window."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tests.workloads.conftest import TRACES_DIR, WORKLOADS_DIR
from zerohop.workloads.data_paths import package_data_dir
from zerohop.workloads.plans import make_planner
from zerohop.workloads.traces import read_trace, replay_window
from zerohop.workloads.yaml_io import load_workload_file

pytestmark = pytest.mark.unit

SHIPPED_TRACES = package_data_dir() / "traces"
SLICE = SHIPPED_TRACES / "azure_conv_first3600.csv"
MAX_SHIPPED_BYTES = 400_000


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_slice_is_small_and_carries_its_licence_and_attribution() -> None:
    shipped = [p for p in SHIPPED_TRACES.iterdir() if p.suffix in (".csv", ".jsonl", ".json")]
    assert sum(p.stat().st_size for p in shipped) <= MAX_SHIPPED_BYTES
    attribution = (SHIPPED_TRACES / "ATTRIBUTION.md").read_text()
    for needed in ("CC BY 4.0", "creativecommons.org/licenses/by/4.0", "Splitwise",
                   "Azure/AzurePublicDataset", SLICE.name):
        assert needed in attribution
    rows = read_trace(SLICE, "azure_csv")
    assert 3000 <= len(rows) <= 5000


def test_no_shipped_trace_is_a_copy_of_a_public_one() -> None:
    if not TRACES_DIR.is_dir():
        pytest.skip(f"no public traces at {TRACES_DIR} to compare with")
    public = {_sha256(p) for p in TRACES_DIR.rglob("*") if p.is_file()}
    for path in SHIPPED_TRACES.iterdir():
        assert _sha256(path) not in public, path


def test_the_slice_is_the_start_of_the_public_trace() -> None:
    full = TRACES_DIR / "AzureLLMInferenceTrace_conv.csv"
    if not full.is_file():
        pytest.skip(f"public trace not found at {full}")
    sliced = SLICE.read_text().splitlines()
    assert full.read_text().splitlines()[: len(sliced)] == sliced


def test_the_default_window_fits_in_the_slice() -> None:
    """The default replay (600 s of trace at 10x) must end before the slice does: a
    window cut short by the slice would replay fewer requests than the trace has."""
    spec = load_workload_file(WORKLOADS_DIR / "trace_replay_azure_conv.yaml").workloads[0]
    rows = read_trace(spec.trace, spec.resolved_format)
    window = replay_window(rows, speed=spec.speed, start_offset_s=spec.start_offset_s,
                           duration_s=spec.duration_s, max_requests=spec.max_requests)
    assert 0 < len(window) < len(rows)  # later rows exist: the window was not cut short
    planner = make_planner(spec, seed=1, worker_index=0, worker_count=1, calibration=None)
    assert sum(1 for _ in planner.schedule()) == len(window)
