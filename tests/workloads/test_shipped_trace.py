"""The trace slices that ship in the package: small, attributed, slices (not copies),
and long enough for the windows of the default workload files that replay them."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tests.tiers import skip_unless_required
from tests.workloads.conftest import TRACES_DIR, WORKLOADS_DIR, trace_path
from zerohop.workloads.planners.request_plans import make_planner
from zerohop.workloads.schema.data_paths import package_data_dir
from zerohop.workloads.timing.traces import read_trace, replay_window
from zerohop.workloads.yaml_io import load_workload_file

pytestmark = pytest.mark.unit

SHIPPED_TRACES = package_data_dir() / "traces"
SLICE = SHIPPED_TRACES / "azure_conv_first3600.csv"
MOONCAKE_SLICE = SHIPPED_TRACES / "mooncake_conversation_first200s.jsonl"
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
    for needed in ("Apache License 2.0", "kvcache-ai/Mooncake", "FAST 2025",
                   MOONCAKE_SLICE.name):
        assert needed in attribution
    assert len(read_trace(MOONCAKE_SLICE, "mooncake_jsonl")) == 599


def test_no_shipped_trace_is_a_copy_of_a_public_one() -> None:
    if not TRACES_DIR.is_dir():
        skip_unless_required("ZEROHOP_REQUIRE_TRACES",
                             f"no public traces at {TRACES_DIR} to compare with")
    public = {_sha256(p) for p in TRACES_DIR.rglob("*") if p.is_file()}
    for path in SHIPPED_TRACES.iterdir():
        assert _sha256(path) not in public, path


@pytest.mark.parametrize(("sliced", "public"), [
    (SLICE, "AzureLLMInferenceTrace_conv.csv"),
    (MOONCAKE_SLICE, "conversation_trace.jsonl"),
], ids=["azure", "mooncake"])
def test_the_slice_is_the_start_of_the_public_trace(sliced: Path, public: str) -> None:
    lines = sliced.read_text().splitlines()
    assert trace_path(public).read_text().splitlines()[: len(lines)] == lines


@pytest.mark.parametrize(("file", "index"), [
    ("trace_replay_azure_conv.yaml", 0),  # 600 s of trace at 10x
    ("all.yaml", 3),                      # 150 s at 5x
])
def test_the_default_window_fits_in_the_slice(file: str, index: int) -> None:
    """A default replay must end before its slice does: a window cut short by the slice
    would replay fewer requests than the trace has."""
    spec = load_workload_file(WORKLOADS_DIR / file).workloads[index]
    assert spec.trace.is_relative_to(package_data_dir())
    rows = read_trace(spec.trace, spec.resolved_format)
    window = replay_window(rows, speed=spec.speed, start_offset_s=spec.start_offset_s,
                           duration_s=spec.duration_s, max_requests=spec.max_requests)
    assert 0 < len(window) < len(rows)  # later rows exist: the window was not cut short
    planner = make_planner(spec, seed=1, worker_index=0, worker_count=1, calibration=None)
    assert sum(1 for _ in planner.schedule()) == len(window)
