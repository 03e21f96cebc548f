"""microbench.json schema v1: round trip, validation, versioning."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from zerohop.microbench.schema import (
    MIGRATIONS,
    BenchmarkResult,
    MicrobenchFileError,
    MicrobenchResult,
    Stat,
    load_microbench,
    migrate,
    overall_status,
    parse_microbench,
    write_microbench,
)

pytestmark = pytest.mark.unit


def stat(**overrides: Any) -> dict[str, Any]:
    base = {"unit": "us", "median": 2.1, "p50": 2.1, "p99": 3.4, "min": 1.9, "max": 9.0,
            "mean": 2.2, "stdev": 0.3, "n": 2000, "description": "x"}
    return {**base, **overrides}


def document() -> dict[str, Any]:
    """A complete v1 document, every section filled in."""
    return {
        "schema": "zerohop.microbench",
        "schema_version": 1,
        "status": "ok",
        "reason": None,
        "created_at": "2026-11-29T19:30:00Z",
        "zerohop_version": "0.1.0",
        "environment": {
            "gpu_name": "NVIDIA H200", "gpu_uuid": "GPU-1", "driver_version": "580.1",
            "cuda_driver_version": 13000, "cuda_runtime_version": 13000,
            "cupy_version": "14.2.0", "compute_capability": "9.0", "sm_count": 132,
            "pcie": {"gen": 5, "width": 16, "max_gen": 5, "max_width": 16,
                     "theoretical_gbps_per_direction": 63.0},
            "clocks_before": {"sm_mhz": 1980, "mem_mhz": 3201},
            "clocks_after": {"sm_mhz": 1980, "mem_mhz": 3201},
            "clock_event_reasons_before": ["none"],
            "clock_event_reasons_after": ["gpu_idle"],
        },
        "benchmarks": {
            "launch": {"status": "ok", "reason": None,
                       "metrics": {"launch_sync_roundtrip_us": stat()}},
            "ring": {"status": "ok", "reason": None,
                     "metrics": {"ring_roundtrip_us": stat(median=1.5, p50=1.5, min=1.0)}},
            "pcie": {"status": "ok", "reason": None,
                     "metrics": {"h2d_pinned_256MiB_gbps": stat(unit="GB/s")},
                     "curve": [{"direction": "h2d", "memory": "pinned",
                                "size_bytes": 1048576, "gbps": stat(unit="GB/s"),
                                "pct_of_link": 92.1, "verified": True}]},
        },
    }


def test_round_trip_is_lossless(tmp_path: Path) -> None:
    result = parse_microbench(document())
    path = write_microbench(result, tmp_path / "run" / "microbench.json")
    written = json.loads(path.read_text())
    assert written == document()
    assert load_microbench(path) == result
    assert not list(tmp_path.rglob("*.tmp"))


def test_curve_key_appears_only_where_there_is_a_curve() -> None:
    data = json.loads(parse_microbench(document()).to_json())
    assert "curve" not in data["benchmarks"]["launch"]
    assert data["benchmarks"]["pcie"]["curve"][0]["pct_of_link"] == 92.1


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(extra_field=1), "extra"),
        (lambda d: d.update(status="fine"), "status"),
        (lambda d: d.update(status="skipped"), "needs a reason"),
        (lambda d: d.update(created_at="yesterday"), "ISO-8601"),
        (lambda d: d.update(created_at="2026-11-29T19:30:00"), "time zone"),
        (lambda d: d["benchmarks"].update(gemm={"status": "ok", "metrics": {}}), "unknown"),
        (lambda d: d["benchmarks"]["ring"].update(status="failed"), "needs a reason"),
        (lambda d: d["benchmarks"]["ring"].update(status="partial", reason="x"), "not ok"),
        (lambda d: d["benchmarks"]["launch"]["metrics"].update(bad=stat(p50=10.0, median=10.0)),
         "out of order"),
        (lambda d: d["benchmarks"]["launch"]["metrics"].update(bad=stat(median=2.0)), "median"),
        (lambda d: d["benchmarks"]["launch"]["metrics"].update(bad=stat(n=0)),
         "greater than or equal to 1"),
        (lambda d: d["benchmarks"]["launch"]["metrics"].update(bad=stat(mean=float("nan"))),
         "finite"),
        (lambda d: d["benchmarks"]["pcie"]["curve"][0].update(direction="sideways"), "direction"),
        (lambda d: d["environment"]["pcie"].update(theoretical_gbps_per_direction=0), "greater"),
    ],
)
def test_invalid_documents_are_rejected(mutate: Any, message: str) -> None:
    doc = copy.deepcopy(document())
    mutate(doc)
    with pytest.raises(ValidationError, match=message):
        parse_microbench(doc)


def test_a_skipped_result_needs_only_the_reason() -> None:
    result = MicrobenchResult(status="skipped", reason="no CUDA device found: none",
                              created_at="2026-11-29T19:30:00Z", zerohop_version="0.1.0")
    data = json.loads(result.to_json())
    assert data["schema"] == "zerohop.microbench"
    assert data["schema_version"] == 1
    assert data["benchmarks"] == {}
    assert data["environment"]["pcie"]["gen"] is None


def test_newer_and_foreign_files_are_refused(tmp_path: Path) -> None:
    newer = {**document(), "schema_version": 2}
    with pytest.raises(MicrobenchFileError, match="newer"):
        migrate(newer)
    with pytest.raises(MicrobenchFileError, match=r"expected 'zerohop\.microbench'"):
        migrate({**document(), "schema": "zerohop.run"})
    with pytest.raises(MicrobenchFileError, match="not an integer"):
        migrate({**document(), "schema_version": "1"})
    with pytest.raises(MicrobenchFileError, match="no migration from schema_version 0"):
        migrate({**document(), "schema_version": 0})
    broken = tmp_path / "microbench.json"
    broken.write_text("{not json")
    with pytest.raises(MicrobenchFileError, match=re.escape(broken.name)):
        load_microbench(broken)
    invalid = tmp_path / "invalid.json"
    invalid.write_text(json.dumps({**document(), "status": "bogus"}))
    with pytest.raises(MicrobenchFileError, match=r"invalid\.json"):
        load_microbench(invalid)


def test_older_versions_are_migrated_step_by_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """The migration chain runs in order; a v0 document (hypothetical, for the mechanism)
    that called `benchmarks` `results` is renamed on the way to v1."""
    def v0_to_v1(doc: dict[str, Any]) -> dict[str, Any]:
        doc = dict(doc)
        doc["benchmarks"] = doc.pop("results")
        return doc

    monkeypatch.setitem(MIGRATIONS, 0, v0_to_v1)
    old = document()
    old["results"] = old.pop("benchmarks")
    old["schema_version"] = 0
    assert parse_microbench(old) == parse_microbench(document())


def test_overall_status() -> None:
    ok = BenchmarkResult(status="ok")
    partial = BenchmarkResult(status="partial", reason="r")
    failed = BenchmarkResult(status="failed", reason="r")
    assert overall_status({}) == "skipped"
    assert overall_status({"launch": ok, "ring": ok}) == "ok"
    assert overall_status({"launch": ok, "ring": failed}) == "partial"
    assert overall_status({"launch": partial}) == "partial"
    assert overall_status({"launch": failed, "ring": failed}) == "failed"


def test_stat_accepts_a_single_sample() -> None:
    one = Stat(unit="us", median=1.0, p50=1.0, p99=1.0, min=1.0, max=1.0, mean=1.0,
               stdev=0.0, n=1)
    assert one.n == 1
