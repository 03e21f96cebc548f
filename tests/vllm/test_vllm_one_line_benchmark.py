"""The one-line benchmark on vLLM CPU: `zerohop run --input-tokens 1000 --output-tokens
200 --rate 10 --requests N` against the tier's server, on chat and completions: every
prompt the asked size by vLLM's own count (`usage.prompt_tokens`), every answer held to
200 tokens by `ignore_eos`, and the results block printed with its CSV beside it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.exact_prompt_sizes import APIS
from tests.vllm_cpu import SERVED_MODEL_NAME, VllmServer

REQUESTS = 12  # a tiny model on CPU: 200 decode steps each, 10 arrivals a second


@pytest.mark.parametrize("api", APIS)
def test_the_one_line_benchmark_sends_every_prompt_at_its_size(vllm_server: VllmServer,
                                                               tmp_path: Path, api: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "zerohop", "run", "--host", vllm_server.url, "--model",
         SERVED_MODEL_NAME, "--api", api, "--input-tokens", "1000", "--output-tokens", "200",
         "--rate", "10", "--requests", str(REQUESTS), "--telemetry", "none",
         "--microbench", "off", "--no-report", "--results-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-1500:] + done.stderr[-3000:]
    [run_dir] = [p for p in tmp_path.iterdir() if p.is_dir() and not p.name.startswith(".")]
    records = pd.read_parquet(run_dir / "requests.parquet")
    ok = records[records["outcome"] == "ok"]
    assert len(ok) == REQUESTS
    assert (ok["prompt_token_source"] == "tokenize").all()
    assert (ok["input_tokens"] == 1000).all(), ok["input_tokens"].value_counts()
    assert (ok["output_tokens"] == 200).all(), ok["output_tokens"].value_counts()
    assert "Total token throughput (tok/s):" in done.stdout
    assert (run_dir / "results.csv").is_file()
