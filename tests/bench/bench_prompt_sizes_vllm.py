"""Benchmark: asked vs achieved prompt sizes on a real vLLM CPU server (the tiny test model).

Starts vLLM with the tiny model of the vllm tier (tools/vllm_cpu/setup_env.sh must have
run), then one `zerohop run` per API with a fixed 64-token flood and 256-2048-token
documents, and prints, per workload, the server's `usage.prompt_tokens` minus the asked
size: mean, min, max, the share within ±1 token and the median relative error. The
records' `prompt_token_source` says which method sized the prompts (`tokenize` on vLLM).

    python tests/bench/bench_prompt_sizes_vllm.py --duration 15s

Run it more than once: these machines are shared and noisy (the sizes are not timing).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

from zerohop.testing.vllm_cpu import (
    adapters_in,
    build_tiny_model,
    default_model_dir,
    probe_env,
    start_vllm,
)

WORKLOADS = """
workloads:
  - kind: short_query_flood
    name: flood64
    input_tokens: 64
    max_tokens: 4
    load: {kind: closed, users: 2}
  - kind: long_context
    name: documents
    document_tokens: {type: uniform, min: 256, max: 2048}
    summary_tokens: 4
    load: {kind: closed, users: 1}
"""


def report(run: Path, api: str) -> None:
    frame = pd.read_parquet(run / "requests.parquet")
    ok = frame[frame["outcome"] == "ok"]
    print(f"{api}: prompt_token_source {sorted(ok['prompt_token_source'].unique())}")
    error = ok["input_tokens"] - ok["target_input_tokens"]
    for workload, part in ok.assign(error=error).groupby("workload"):
        relative = (part["error"] / part["target_input_tokens"]).median() * 100
        print(f"  {workload}: n={len(part)} asked {part['target_input_tokens'].min():.0f}-"
              f"{part['target_input_tokens'].max():.0f} achieved-asked mean "
              f"{part['error'].mean():+.2f} min {part['error'].min():+.0f} max "
              f"{part['error'].max():+.0f} within ±1 {(part['error'].abs() <= 1).mean():.3f} "
              f"median {relative:+.2f} %")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", default="15s")
    args = parser.parse_args()
    probe = probe_env(setup=False)
    if probe.env is None:
        sys.exit(f"vLLM CPU env not found at {probe.venv}: run tools/vllm_cpu/setup_env.sh")
    model_dir = build_tiny_model(probe.env, default_model_dir())
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        workloads = root / "workloads.yaml"
        workloads.write_text(WORKLOADS)
        with start_vllm(probe.env, model_dir, lora_adapters=adapters_in(model_dir),
                        log_path=root / "vllm.log") as server:
            for api in ("openai-chat", "openai-completions"):
                out = root / api
                res = subprocess.run(
                    [sys.executable, "-m", "zerohop", "run", "--host", server.url, "--model",
                     "tiny", "--api", api, "--workload", str(workloads), "--duration",
                     args.duration, "--telemetry", "none", "--microbench", "off",
                     "--results-dir", str(out), "--no-report"],
                    capture_output=True, text=True, timeout=600,
                )
                if res.returncode != 0:
                    sys.exit(f"{api}: zerohop run exited {res.returncode}: {res.stderr[-800:]}")
                report(next(p for p in out.iterdir() if p.is_dir()), api)


if __name__ == "__main__":
    main()
