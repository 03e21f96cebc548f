"""`zerohop microbench`: the no-GPU path, option errors, output files, the table."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.microbench.fake_cupy import FakeGpu
from tests.microbench.test_schema import document, stat
from zerohop.cli import cli
from zerohop.microbench.microbench_command import microbench_command
from zerohop.microbench.schema import load_microbench, parse_microbench
from zerohop.microbench.table import evaluate_goals, format_number, format_table

pytestmark = pytest.mark.unit


@pytest.mark.usefixtures("no_cupy")
def test_no_cuda_device_is_skipped_with_exit_0(tmp_path: Path) -> None:
    result = CliRunner().invoke(microbench_command, ["--results-root", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "no CUDA device found: CuPy is not importable" in result.stderr
    assert "zerohop microbench: skipped" in result.stdout
    [run_dir] = list(tmp_path.iterdir())
    assert run_dir.name.endswith("-microbench")
    saved = load_microbench(run_dir / "microbench.json")
    assert saved.status == "skipped"
    assert saved.reason and saved.reason.startswith("no CUDA device found: ")
    assert saved.benchmarks == {}
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert (manifest["status"], manifest["name"]) == ("completed", "microbench")


@pytest.mark.usefixtures("no_cupy")
def test_out_dir_is_used_as_is(tmp_path: Path) -> None:
    out = tmp_path / "given"
    result = CliRunner().invoke(microbench_command, ["--quick", "--out-dir", str(out)])
    assert result.exit_code == 0, result.output
    assert (out / "microbench.json").is_file()
    assert not (out / "manifest.json").exists()  # the folder's owner writes that


def test_unknown_benchmark_is_a_usage_error() -> None:
    result = CliRunner().invoke(microbench_command, ["--only", "launch,gemm"])
    assert result.exit_code == 2
    assert "--only" in result.output and "gemm" in result.output


def test_registered_under_the_zerohop_command() -> None:
    result = CliRunner().invoke(cli, ["microbench", "--help"])
    assert result.exit_code == 0, result.output
    for option in ("--only", "--quick", "--out-dir", "--device"):
        assert option in result.output


def test_a_real_run_on_the_fake_gpu(fake_gpu: Callable[..., FakeGpu], tmp_path: Path) -> None:
    fake_gpu()
    result = CliRunner().invoke(
        microbench_command, ["--only", "launch", "--plan", "smoke", "--out-dir", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    assert "launch_sync_roundtrip_us" in result.stdout
    assert "launch: stream priority" in result.stderr  # the progress lines
    saved = load_microbench(tmp_path / "microbench.json")
    assert saved.status == "ok"
    assert list(saved.benchmarks) == ["launch"]


def test_a_failed_benchmark_exits_1(
    fake_gpu: Callable[..., FakeGpu], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_gpu()
    from zerohop.microbench import runner

    def boom(ctx: Any) -> Any:
        raise RuntimeError("broken")

    monkeypatch.setitem(runner.BENCHMARKS, "launch", runner.BenchmarkSpec(lambda p: 0, boom))
    result = CliRunner().invoke(
        microbench_command, ["--only", "launch", "--plan", "smoke", "--out-dir", str(tmp_path)]
    )
    assert result.exit_code == 1
    assert load_microbench(tmp_path / "microbench.json").status == "failed"
    assert "launch: failed: RuntimeError: broken" in result.stdout


def full_result_document(h2d_pct: float, ring_p50: float) -> dict:
    doc = document()
    doc["benchmarks"]["ring"]["metrics"]["ring_roundtrip_us"] = stat(
        median=ring_p50, p50=ring_p50, min=min(1.0, ring_p50), p99=max(3.4, ring_p50))
    gbps = 63.0 * h2d_pct / 100
    doc["benchmarks"]["pcie"]["curve"] = [
        {"direction": d, "memory": "pinned", "size_bytes": 256 << 20,
         "gbps": stat(unit="GB/s", median=gbps, p50=gbps, min=gbps, mean=gbps, p99=gbps,
                      max=gbps),
         "pct_of_link": h2d_pct, "verified": d == "h2d"}
        for d in ("h2d", "d2h")
    ]
    return doc


def test_goals_met_and_missed() -> None:
    met = evaluate_goals(parse_microbench(full_result_document(h2d_pct=90.0, ring_p50=1.5)))
    assert [g.met for g in met] == [True, True, True]
    assert "56.7 GB/s = 90.0% of 63.0 GB/s" in met[0].detail
    missed = evaluate_goals(parse_microbench(full_result_document(h2d_pct=80.0, ring_p50=2.5)))
    assert [g.met for g in missed] == [False, False, False]
    assert "ring 2.50 us vs launch + sync 2.10 us" in missed[2].detail


def test_table_shows_environment_metrics_curve_and_goals() -> None:
    text = format_table(parse_microbench(full_result_document(h2d_pct=90.0, ring_p50=1.5)))
    assert "NVIDIA H200" in text and "Gen5 x16" in text and "63.0 GB/s per direction" in text
    assert "clock events: none" in text
    row = next(line for line in text.splitlines() if "launch_sync_roundtrip_us" in line)
    assert row.split()[2:5] == ["2.100", "3.400", "1.900"]
    assert "256 MiB" in text and "56.700 (90%)" in text
    assert "56.700 (90%)!" in text  # the d2h point is marked unverified
    assert "[ MET  ] pinned H2D at 256 MiB" in text


def test_number_format() -> None:
    assert format_number(1.23456) == "1.235"
    assert format_number(123.456) == "123.5"
    assert format_number(123456.7) == "123,457"
