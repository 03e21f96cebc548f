"""`zerohop run` against targets that serve other adapters than ours, or none: the
shipped LoRA mix takes the target's adapters; what cannot fit is refused before any
load (asked for) or left out and said on the console (a default)."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from tests.main_job.test_run_command import assert_one_line_error, zerohop
from zerohop.sim.launcher import start_sim

pytestmark = pytest.mark.integration  # starts the embedded target and `zerohop run`

ADAPTERS = ["a0", "a1", "a2", "a3"]


def _sim(tmp_path: Path, lora: str) -> Iterator[str]:
    config = tmp_path / "target.yaml"
    config.write_text("models:\n  - model: llama-3.2-1b\n    name: tiny-base\n"
                      f"    gpu: h100-sxm\n{lora}")
    sim = start_sim(["--config", str(config)])
    try:
        yield sim.url
    finally:
        sim.stop()


@pytest.fixture()
def with_adapters(tmp_path: Path) -> Iterator[str]:
    """A target serving a0..a3 on its base model, as `vllm serve --enable-lora` would."""
    yield from _sim(tmp_path, f"    lora:\n      adapters: [{', '.join(ADAPTERS)}]\n"
                              "      max_loras: 2\n")


@pytest.fixture()
def without_adapters(tmp_path: Path) -> Iterator[str]:
    yield from _sim(tmp_path, "")


def _prompt_tokens_served(url: str) -> int:
    with urllib.request.urlopen(url + "/zerohop/stats", timeout=10) as resp:
        stats = json.loads(resp.read())
    return sum(int(e["prompt_tokens"]) for e in stats["engines"])


def _only_run(results: Path) -> Path:
    runs = [p for p in results.iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    return runs[0]


def test_the_shipped_lora_mix_asks_for_the_targets_adapters(with_adapters: str,
                                                            tmp_path: Path) -> None:
    res = zerohop("run", "--host", with_adapters, "--only", "LoRAMix", "--duration", "6s",
                  "--no-report", "--results-dir", str(tmp_path / "r"))
    assert res.returncode == 0, res.stderr[-2000:]
    run = _only_run(tmp_path / "r")
    df = pd.read_parquet(run / "requests.parquet")
    lora = df[df.workload == "lora_mix"]
    assert len(lora) > 10
    assert (lora.outcome == "ok").all(), lora.outcome.value_counts()
    used = set(lora.adapter.dropna())
    assert used <= set(ADAPTERS) and len(used) >= 2, used
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["workload_selection"]["adapters"] == {"LoRAMix": ADAPTERS}


def test_a_target_without_adapters_runs_the_rest_and_says_so(without_adapters: str,
                                                             tmp_path: Path) -> None:
    """With two workers: they run what the master decided (a worker that planned the
    left-out mix on its own would fail its set-up and make the run partial)."""
    res = zerohop("run", "--host", without_adapters, "--duration", "6s", "--workers", "2",
                  "--no-report", "--results-dir", str(tmp_path / "r"))
    assert res.returncode == 0, res.stderr[-2000:]
    assert "zerohop: LoRAMix left out: the target serves no LoRA adapters" in res.stderr
    run = _only_run(tmp_path / "r")
    df = pd.read_parquet(run / "requests.parquet")
    assert set(df.workload) == {"short_query_flood", "long_context", "trace_replay_azure_conv"}
    assert df.worker.nunique() == 2
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "completed"
    assert list(manifest["workload_selection"]["left_out"]) == ["LoRAMix"]


def test_adapters_the_target_does_not_serve_are_refused_before_any_load(
        with_adapters: str, tmp_path: Path) -> None:
    wl = tmp_path / "mix.yaml"
    wl.write_text("kind: lora_mix\nname: mine\nadapters: {count: 8, prefix: lora-}\n"
                  "input_tokens: 32\nmax_tokens: 8\n")
    res = zerohop("run", "--host", with_adapters, "--workload", str(wl), "--duration", "5s",
                  "--no-report", "--results-dir", str(tmp_path / "r"), timeout=120)
    assert_one_line_error(res, 2, "lora-0", "tiny-base (adapters: a0, a1, a2, a3)")
    assert _prompt_tokens_served(with_adapters) == 0  # not one request, probes included
