"""Several served models, each with its own engine and GPUs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from zerohop.sim.launcher import SimProcess, start_sim

from .wire import request

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimProcess]:
    config = tmp_path_factory.mktemp("fleet") / "sim.yaml"
    config.write_text(
        "models:\n"
        "  - {name: big, model: llama-3-70b, tp: 4}\n"
        "  - {name: small, model: llama-3.2-1b, gpu: l4}\n"
    )
    with start_sim(["--config", str(config)]) as process:
        yield process


def tpot_ms(fleet: SimProcess, model: str) -> float:
    body = {"model": model, "prompt": "hi", "max_tokens": 6, "stream": True, "ignore_eos": True}
    r = request(fleet.url, "/v1/completions", body)
    assert r.status == 200 and r.complete
    record = request(
        fleet.url, f"/zerohop/ground_truth?request_id={r.headers['x-request-id']}"
    ).json()
    return (record["last_token_ts"] - record["first_token_ts"]) * 1e3 / 5


@pytest.mark.alone  # timing-sensitive: CI runs it with no test beside it
def test_each_model_is_served_by_its_own_engine(fleet: SimProcess) -> None:
    ids = [m["id"] for m in request(fleet.url, "/v1/models").json()["data"]]
    assert ids == ["big", "small"]
    assert tpot_ms(fleet, "big") > tpot_ms(fleet, "small")
    stats = request(fleet.url, "/zerohop/stats").json()["engines"]
    assert [(e["name"], e["tp"]) for e in stats] == [("big", 4), ("small", 1)]
    metrics = request(fleet.url, "/metrics").body.decode()
    assert 'vllm:num_requests_running{model_name="big"}' in metrics
    assert 'vllm:num_requests_running{model_name="small"}' in metrics
    gpus = {
        line.split('gpu="')[1].split('"')[0]
        for line in metrics.splitlines()
        if line.startswith("DCGM_FI_DEV_GPU_UTIL{")
    }
    assert gpus == {"0", "1", "2", "3", "4"}
    assert 'modelName="NVIDIA L4"' in metrics
