"""The layers tier: real layers users deploy (vllm-router, nginx) in front of embedded
engine replicas, priced by zerohop (docs/layers.md).

vllm-router comes from PyPI (`pip install -e '.[layers]'`), nginx from Debian
(`apt-get install -y nginx`); `.ci/run` installs both. Without them these tests skip,
naming what is missing, unless ZEROHOP_REQUIRE_LAYERS=1 (CI sets it), where a missing
layer fails instead of passing as skipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.real_layers import find_nginx, find_vllm_router
from tests.tiers import mark_folder, skip_unless_required

_THIS_DIR = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test under tests/layers_real belongs to the layers (and integration) tiers."""
    mark_folder(items, _THIS_DIR, pytest.mark.layers, pytest.mark.integration)


def _need(found: str | None, what: str, install: str) -> str:
    if found is not None:
        return found
    skip_unless_required("ZEROHOP_REQUIRE_LAYERS", f"{what} not found ({install})")


@pytest.fixture(scope="session")
def vllm_router_bin() -> str:
    return _need(find_vllm_router(), "vllm-router", "pip install -e '.[layers]'")


@pytest.fixture(scope="session")
def nginx_bin() -> str:
    return _need(find_nginx(), "nginx", "apt-get install -y nginx")


@pytest.fixture
def replicas() -> Iterator[list[str]]:
    """Two embedded engine replicas, each its own process: their URLs."""
    from zerohop.sim.embedded import start_embedded_replicas

    started = start_embedded_replicas(2)
    try:
        yield [r.url for r in started]
    finally:
        for replica in started:
            replica.stop()
