"""The real-engine tier: one vLLM CPU server (tiny model + LoRA adapters a0..a3) per session.

The vLLM venv is set up outside pytest (tools/vllm_cpu/setup_env.sh: minutes, ~3.5 GB).
Without it these tests skip, unless ZEROHOP_REQUIRE_VLLM=1 (CI sets it right after
running setup_env.sh), where a missing env fails loudly instead of passing as skipped.
ZEROHOP_VLLM_SETUP=1 lets the fixture run setup_env.sh itself.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.tiers import mark_folder, skip_unless_required
from tests.vllm_cpu import (
    VllmServer,
    adapters_in,
    build_tiny_model,
    default_model_dir,
    probe_env,
    start_vllm,
)

_THIS_DIR = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test under tests/vllm belongs to the vllm (and integration) tiers."""
    mark_folder(items, _THIS_DIR, pytest.mark.vllm, pytest.mark.integration)


@pytest.fixture(scope="session")
def vllm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    """A running vLLM CPU server serving model `tiny` and adapters a0..a3 (max 2 at once),
    its prefix cache on and reported in usage (`prompt_tokens_details.cached_tokens`).

    With 2 or more CPUs the server is confined to the last one and this process (with
    every thread and Locust process it starts) to the others, for the whole session:
    sharing a core with vLLM stalls whole responses, /metrics scrapes included (docs/
    nightly-and-capacity.md, "Measure a curve that repeats").
    """
    probe = probe_env(setup=os.environ.get("ZEROHOP_VLLM_SETUP") == "1")
    if probe.env is None:
        skip_unless_required(
            "ZEROHOP_REQUIRE_VLLM",
            f"vLLM CPU env not found at {probe.venv}: run tools/vllm_cpu/setup_env.sh "
            f"({probe.reason})",
        )
    model_dir = build_tiny_model(probe.env, default_model_dir())
    log_path = tmp_path_factory.mktemp("vllm") / "server.log"
    cpus = sorted(os.sched_getaffinity(0))
    server_cpus = cpus[-1:] if len(cpus) >= 2 else None
    with start_vllm(
        probe.env, model_dir, lora_adapters=adapters_in(model_dir), log_path=log_path,
        cpus=server_cpus, extra_args=["--enable-prompt-tokens-details"],  # cached_tokens
    ) as server:
        if server_cpus:
            os.sched_setaffinity(0, cpus[:-1])
        try:
            yield server
        finally:
            os.sched_setaffinity(0, cpus)
