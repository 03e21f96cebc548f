"""`zerohop run` against servers that count tokens differently, or fail everything.

Each case is a real run against `quirky_server` (a small streaming server in this
folder): no traceback ever; a one-line warning on the console when the usage counts
cannot size prompts, with the records saying which method did (`prompt_token_source`);
and a run where every request failed still writes its folder and report, says why in
one line and exits 4."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.targets.quirky_server import MODEL, quirky_server

pytestmark = pytest.mark.integration

_WORKLOAD = """
kind: short_query_flood
name: quick
input_tokens: {type: uniform, min: 16, max: 64}
max_tokens: 4
load: {kind: closed, users: 2}
"""


def _run(url: str, tmp_path: Path, api: str = "openai-chat") -> subprocess.CompletedProcess[str]:
    workload = tmp_path / "quick.yaml"
    workload.write_text(_WORKLOAD)
    return subprocess.run(
        [sys.executable, "-m", "zerohop", "run", "--host", url, "--model", MODEL, "--api", api,
         "--workload", str(workload), "--duration", "5s", "--telemetry", "none",
         "--microbench", "off", "--results-dir", str(tmp_path / "results")],
        capture_output=True, text=True, timeout=180, cwd=tmp_path,
    )


def _records(tmp_path: Path) -> tuple[Path, pd.DataFrame]:
    (run,) = [p for p in (tmp_path / "results").iterdir() if p.is_dir()]
    return run, pd.read_parquet(run / "requests.parquet")


def _warnings(res: subprocess.CompletedProcess[str]) -> list[str]:
    return [ln for ln in res.stderr.splitlines() if ln.startswith("zerohop: warning:")]


@pytest.mark.parametrize("usage, says", [
    ("absent", "was absent"),
    ("constant", "was 17 for prompts of 64 and 512 words alike"),
    ("zero", "was 0"),
])
def test_unusable_usage_warns_once_and_sizes_prompts_by_the_estimate(
        usage: str, says: str, tmp_path: Path) -> None:
    with quirky_server(usage) as url:
        res = _run(url, tmp_path, api="openai-completions" if usage == "zero" else "openai-chat")
    assert res.returncode == 0, res.stderr[-3000:]
    assert "Traceback" not in res.stdout + res.stderr
    (warning,) = _warnings(res)
    assert "prompt sizing" in warning and says in warning and "estimate" in warning
    run, frame = _records(tmp_path)
    assert len(frame) > 0 and (frame["outcome"] == "ok").all()
    assert set(frame["prompt_token_source"]) == {"estimate"}
    assert (run / "report.html").is_file()
    if usage in ("absent", "zero"):  # nothing usable: the client's own count stands
        assert frame["input_tokens"].isna().all()
        assert set(frame["token_source"]) == {"counted"}
        assert (frame["output_tokens"] == frame["counted_output_tokens"]).all()


@pytest.mark.parametrize("usage", ["nonstream_only", "details", "overcount"])
def test_usable_usage_sizes_prompts_without_a_warning(usage: str, tmp_path: Path) -> None:
    with quirky_server(usage) as url:
        res = _run(url, tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "Traceback" not in res.stdout + res.stderr and not _warnings(res)
    run, frame = _records(tmp_path)
    assert (frame["outcome"] == "ok").all()
    assert set(frame["prompt_token_source"]) == {"usage"}
    if usage == "nonstream_only":  # calibrated without streaming; the run's streams count
        assert set(frame["token_source"]) == {"counted"}
    else:
        assert set(frame["token_source"]) == {"usage"}
        # sized on the server's own counts: within ±3 % of the asked size at the median
        error = (frame["input_tokens"] - frame["target_input_tokens"]) / frame[
            "target_input_tokens"]
        assert abs(error.median()) <= 0.03
    if usage == "overcount":  # the server bills 2 more than the stream delivered
        assert ((frame["output_tokens"] - frame["counted_output_tokens"]) == 2).all()
        html = (run / "report.html").read_text()
        assert 'id="token-counts"' in html and "+2: " in html


def test_a_run_where_every_request_failed_says_why_and_exits_4(tmp_path: Path) -> None:
    with quirky_server("error500") as url:
        res = _run(url, tmp_path)
    assert res.returncode == 4, (res.stdout[-2000:], res.stderr[-3000:])
    assert "Traceback" not in res.stdout + res.stderr
    (why,) = [ln for ln in res.stderr.splitlines() if "no request succeeded" in ln]
    assert "http_500" in why and "always failing" in why
    run, frame = _records(tmp_path)
    assert len(frame) > 0 and (frame["outcome"] == "http_500").all()
    assert (run / "report.html").is_file()
    assert json.loads((run / "manifest.json").read_text())["status"] == "completed"
