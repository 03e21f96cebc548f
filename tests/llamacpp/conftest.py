"""The llamacpp tier: one llama.cpp server (tools/llamacpp) serving the tiny GGUF per session.

llama-server is built outside pytest (tools/llamacpp/build_server.sh: minutes, once,
cached) and the GGUF is written with PyPI's `gguf` (the `llamacpp` extra). Without
either these tests skip, unless ZEROHOP_REQUIRE_LLAMACPP=1 (CI sets it right after
building the server), where a missing one fails loudly instead of passing as skipped.
ZEROHOP_LLAMACPP_BUILD=1 lets the fixture run build_server.sh itself.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.llamacpp_server import (
    LlamaServer,
    build_tiny_gguf,
    default_model_path,
    gguf_missing,
    probe_server,
    start_llama_server,
)
from tests.tiers import mark_folder, skip_unless_required

_THIS_DIR = Path(__file__).resolve().parent
REQUIRE = "ZEROHOP_REQUIRE_LLAMACPP"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test under tests/llamacpp belongs to the llamacpp (and integration) tiers."""
    mark_folder(items, _THIS_DIR, pytest.mark.llamacpp, pytest.mark.integration)


@pytest.fixture(scope="session")
def tiny_gguf() -> Path:
    """The tiny GGUF, written (or reused) in the per-user cache."""
    missing = gguf_missing()
    if missing:
        skip_unless_required(REQUIRE, missing)
    return build_tiny_gguf(default_model_path())


@pytest.fixture(scope="session")
def llama_server(tiny_gguf: Path, tmp_path_factory: pytest.TempPathFactory
                 ) -> Iterator[LlamaServer]:
    """A running llama-server serving `tiny` (4 slots of 16384 tokens, /metrics on).

    With 2 or more CPUs the server is confined to the last one and this process (with
    every Locust process it starts) to the others, for the whole session, as the vllm
    tier does: a load generator sharing the engine's core stalls both.
    """
    probe = probe_server(build=os.environ.get("ZEROHOP_LLAMACPP_BUILD") == "1")
    if not probe.ready:
        skip_unless_required(REQUIRE, f"llama-server not ready ({probe.reason})")
    cpus = sorted(os.sched_getaffinity(0))
    server_cpus = cpus[-1:] if len(cpus) >= 2 else None
    log_path = tmp_path_factory.mktemp("llamacpp") / "server.log"
    with start_llama_server(probe.binary, tiny_gguf, cpus=server_cpus,
                            log_path=log_path) as server:
        print(f"llama-server up in {server.startup_s:.2f} s")
        if server_cpus:
            os.sched_setaffinity(0, cpus[:-1])
        try:
            yield server
        finally:
            os.sched_setaffinity(0, cpus)
