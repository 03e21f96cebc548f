"""`zerohop run` against a real vLLM CPU server: all four workloads, /metrics scraped,
report built, and the contents checked."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd

from tests.vllm_cpu import VllmServer

WORKLOADS = Path(__file__).with_name("tiny_workloads.yaml")


def test_zerohop_run_on_real_vllm(vllm_server: VllmServer, tmp_path: Path) -> None:
    res = subprocess.run(
        [sys.executable, "-m", "zerohop", "run", "--host", vllm_server.url, "--model", "tiny",
         "--workload", str(WORKLOADS), "--duration", "25s", "--users", "9",
         "--telemetry", "prom,loadgen", "--results-dir", str(tmp_path), "--name", "vllm",
         "--answer-probe"],
        capture_output=True, text=True, timeout=300,
    )
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    run = next(p for p in tmp_path.iterdir() if p.is_dir())
    df = pd.read_parquet(run / "requests.parquet")
    assert set(df.workload) == {"flood", "long_doc", "lora", "azure_conv"}
    assert not df.outcome.str.startswith("protocol_error").any()
    assert (df.outcome == "ok").mean() > 0.95, df.outcome.value_counts()
    ok = df[df.outcome == "ok"]
    assert (ok.token_source == "usage").all()  # usage-based token counts from vLLM
    assert (ok.output_tokens == ok.max_tokens).mean() > 0.9  # ignore_eos honoured
    adapters = ok[ok.workload == "lora"].adapter.dropna()
    assert adapters.nunique() >= 3, adapters.value_counts()

    tel = pd.read_parquet(run / "telemetry.parquet")
    queue = tel[tel.metric == "queue_depth"]
    assert len(queue) > 10 and queue.source.str.startswith("prom").all()
    assert (tel.metric == "running_requests").any() and (tel.metric == "kv_cache_usage_frac").any()

    html = (run / "report.html").read_text()
    for name in ("a0", "a1", "flood", "long_doc", "azure_conv"):
        assert name in html
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "completed" and manifest["target"]["kind"] == "external"

    # the answer probe beside the same run (docs/answers-under-load.md): whatever share
    # changed is the finding; the probe itself must have compared its answers
    answers = json.loads((run / "summary.json").read_text())["answers"]
    line = next((x for x in res.stdout.splitlines() if x.startswith("answers under load:")),
                res.stdout[-1000:])
    assert answers is not None and not answers["modelled"], line
    assert answers["failed_alone"] == 0 and answers["failed_load"] == 0, line
    assert answers["compared"] >= 8, (answers["not_under_load"], line)
    assert answers["units"] == ["token"]  # vLLM's logprobs name token strings, not ids
    # it gave logprobs: a change is measured wherever a token came before the first
    # difference (none does when every answer differs from its first token)
    compared_before = [p for p in answers["pairs"] if p["same"] or p["first_difference"]]
    assert (answers["max_logprob_change"] is not None) == bool(compared_before), line
    assert "Answers under load" in html
