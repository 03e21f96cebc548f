"""`zerohop run`: the documented exit codes, one-line errors, and a real short run."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.cli_fork import ForkedZerohop
from tests.cli_fork import shared as shared_fork_server

REPO = Path(__file__).resolve().parents[2]


def zerohop(*args: str, timeout: float = 240, cwd: Path | None = None
            ) -> subprocess.CompletedProcess[str]:
    """`python -m zerohop ARGS` as a child process, forked from the session's preloaded
    `zerohop` (tests/cli_fork.py) so that it skips the seconds of imports a cold one pays;
    `test_unreachable_host_exits_3` keeps one cold start."""
    return shared_fork_server().run(list(args), timeout=timeout, cwd=cwd)


def cold_zerohop(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """`python -m zerohop ARGS` started cold, imports and all."""
    return subprocess.run([sys.executable, "-m", "zerohop", *args], capture_output=True,
                          text=True, timeout=timeout)


def assert_one_line_error(res: subprocess.CompletedProcess[str], code: int, *words: str) -> None:
    assert res.returncode == code, (res.returncode, res.stdout[-500:], res.stderr[-1500:])
    assert "Traceback" not in res.stderr + res.stdout
    err = res.stderr.strip()
    for word in words:
        assert word in err, err


@pytest.mark.integration  # runs `zerohop run` as a child process (forked: tests/cli_fork.py)
@pytest.mark.parametrize("args, words", [
    (["--duration", "soon"], ["--duration"]),
    (["--users", "0"], ["--users"]),
    (["--rate", "-3"], ["--rate"]),
    (["--users", "4", "--rate", "2"], ["exclusive"]),
    (["--slo", "ttft_p99=5"], ["--slo"]),
    (["--slo", "latency_p99_ms=5"], ["unknown metric"]),
    (["--host", "localhost:8000"], ["--host"]),
    (["--telemetry", "gpu-magic"], ["gpu-magic"]),
    (["--workload", "does/not/exist.yaml"], ["exist.yaml"]),
    (["--workers", "-1"], ["--workers"]),
    (["--requests", "0"], ["--requests"]),
    (["--rate", "5", "--max-concurrency", "0"], ["--max-concurrency"]),
    (["--users", "2", "--max-concurrency", "2"], ["--max-concurrency", "--users"]),
    (["--rate", "5", "--max-concurrency", "1", "--workers", "2"], ["--max-concurrency"]),
    (["--tokenizer", "no/such/tokenizer.json"], ["--tokenizer", "does not exist"]),
    (["--tokenizer", "."], ["--tokenizer", "without tokenizer.json"]),
])
def test_bad_input_exits_2_with_one_line(args: list[str], words: list[str], tmp_path: Path,
                                         forked_zerohop: ForkedZerohop) -> None:
    res = forked_zerohop.run(["run", "--results-dir", str(tmp_path), *args], timeout=60)
    assert_one_line_error(res, 2, *words)
    assert not any(tmp_path.iterdir())  # nothing written for a run that never started


@pytest.mark.integration  # runs `zerohop run` as a child process (forked: tests/cli_fork.py)
def test_malformed_workload_names_file_and_field(tmp_path: Path,
                                                 forked_zerohop: ForkedZerohop) -> None:
    wl = tmp_path / "bad.yaml"
    wl.write_text("kind: short_query_flood\nname: x\nload: {kind: open, rate_rps: -2}\n")
    res = forked_zerohop.run(["run", "--workload", str(wl), "--results-dir",
                              str(tmp_path / "r")], timeout=60)
    assert_one_line_error(res, 2, "bad.yaml", "load.rate_rps")


@pytest.mark.integration  # binds a port and runs `zerohop run` as a child process
def test_unreachable_host_exits_3(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = cold_zerohop("run", "--host", f"http://127.0.0.1:{port}", "--results-dir",
                       str(tmp_path), timeout=60)
    assert_one_line_error(res, 3, "unreachable")


@pytest.mark.integration
def test_short_run_writes_results_report_and_judges_slo(tmp_path: Path) -> None:
    res = zerohop("run", "--duration", "10s", "--users", "6", "--only", "ShortQueryFlood",
                  "--only", "LoRAMix", "--slo", "ttft_p99_ms=0.001", "--results-dir",
                  str(tmp_path), "--name", "smoke")
    # an SLO no server can meet: exit 1, but everything written
    assert res.returncode == 1, res.stderr[-3000:]
    run = next(tmp_path.iterdir())
    assert (run / "report.html").exists() and (run / "requests.parquet").exists()
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "completed"
    assert manifest["slo_verdict"]["failed"] is True
    assert "MISSED" in res.stdout and "report:" in res.stdout
    # summary.json: the same run, for scripts (its figures: tests/storage/test_summary_file.py)
    summary = json.loads((run / "summary.json").read_text(),
                         parse_constant=lambda c: pytest.fail(f"{c} in summary.json"))
    assert summary["run"]["status"] == "completed" and summary["slo"]["gate"] == "missed"
    assert {w["workload"] for w in summary["workloads"]} == {
        "short_query_flood", "lora_mix"}
    assert summary["total"]["requests"] == len(pd.read_parquet(run / "requests.parquet"))


@pytest.mark.integration
@pytest.mark.alone  # timing-sensitive: CI runs it with no test beside it
def test_compare_layer_prices_a_5ms_layer(tmp_path: Path) -> None:
    """The embedded layer waits 5 ms per request; at one user (the mode's default) the
    comparison must price the layer at what the layer itself says it spent (its
    `Server-Timing: layer;dur=`, kept on every record) plus the hop: parse, forward and
    relay, which costs 0.5 ms on one 2-core machine of this kind and 1.1 ms on another —
    so the hop's allowance is 3 ms, which a machine twice slower than the slower one keeps.
    The wait itself is the floor on every machine."""
    import pandas as pd

    from zerohop.analysis.server_timing import server_timing_ms

    wl = tmp_path / "flood.yaml"
    wl.write_text("kind: short_query_flood\nname: flood\ninput_tokens: 32\nmax_tokens: 8\n"
                  "load: {kind: closed, users: 2}\n")
    res = zerohop("run", "--compare-layer", "--compare-layer-mode", "sequential",
                  "--layer-args", "--per-request-ms 5", "--workload", str(wl),
                  "--only", "ShortQueryFlood", "--duration", "15s",
                  "--results-dir", str(tmp_path), "--name", "layer", timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "layer cost" in res.stdout
    budget = json.loads(next(tmp_path.glob("compare-*.json")).read_text())
    ttft_p50 = budget["layer_cost_ms"]["ttft_ms"]["p50"]
    layered = pd.read_parquet(next(tmp_path.glob("*-layer-layer")) / "requests.parquet")
    layered = layered[layered.outcome == "ok"]
    spent = [server_timing_ms(v, "layer") for v in layered.server_timing]
    assert spent and None not in spent, layered.server_timing.head()
    layer_p50 = float(pd.Series(spent).median())
    assert layer_p50 >= 5.0  # the layer really waited its 5 ms
    assert layer_p50 - 0.5 <= ttft_p50 <= layer_p50 + 3.0, (layer_p50, budget)
    low, _high = budget["ci95_ms"]["ttft_ms"]["p50"]
    assert low > 3.0  # clearly a cost, not noise
