"""The sim side of fallback chains: memory errors that grow with load, several models,
and engine flags that apply to every model of a multi-model config."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.sim.test_engine import Collector, make_engine, run_until_idle, submit
from zerohop.sim.config import load_config

pytestmark = pytest.mark.unit

FALLBACK_CONFIG = Path(__file__).resolve().parents[2] / "src/zerohop/data/fallback_models.yaml"


def _ooms(concurrent: int, max_preemptions: int | None) -> tuple[int, int]:
    engine = make_engine(num_gpu_blocks=40, block_size=16, max_preemptions=max_preemptions)
    sink = Collector()
    for i in range(concurrent):
        submit(engine, sink, f"r{i}", prompt=150, out=60)
    run_until_idle(engine)
    assert engine.pool.free_blocks == engine.pool.num_blocks  # nothing leaks
    assert len(sink.finished) + len(sink.errors) == concurrent  # every request ends
    assert set(sink.errors.values()) <= {"out_of_memory"}
    return len(sink.errors), engine.stats.oom_failures_total


def test_preemption_limit_turns_kv_pressure_into_memory_errors() -> None:
    assert _ooms(6, None) == (0, 0)  # vLLM-like: recompute, never fail
    light, _ = _ooms(2, 0)  # fits the cache: no pressure, no error
    some, _ = _ooms(4, 0)
    heavy, counted = _ooms(8, 0)
    assert light == 0 < some < heavy and counted == heavy  # more load, more OOMs
    limited, _ = _ooms(8, 2)
    assert limited <= heavy  # allowing recomputes fails fewer


def test_fallback_config_serves_three_models_and_time_scale_applies_to_all() -> None:
    config = load_config(FALLBACK_CONFIG, {"time_scale": 4.0, "max_queue": 8})
    assert [m.served_name() for m in config.models] == ["large", "medium", "small"]
    assert all(m.engine.time_scale == 4.0 for m in config.models)
    assert config.models[0].engine.max_preemptions == 0
    assert config.max_queue == 8
