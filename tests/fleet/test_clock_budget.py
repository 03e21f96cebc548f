"""`zerohop simulate`'s time budget: the virtual clock knows every part of every
request (the layer, the engine's queue, prefill and decode) and writes them as a server
would, in Server-Timing; the budget reads them, so nothing is left unexplained."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.fleet.test_clock import simulate
from zerohop.analysis.server.time_budget import BANDS, time_budget
from zerohop.fleet.layer_model import LayerSpec
from zerohop.sim.config import SimConfig
from zerohop.sim.engine.engine import Engine

pytestmark = pytest.mark.unit

DUR = re.compile(r"(\w+);dur=([0-9.]+)")


def _parts(header: str) -> dict[str, float]:
    return {name: float(ms) for name, ms in DUR.findall(header)}


def test_every_ok_row_carries_parts_that_add_up_to_its_latencies(tmp_path: Path) -> None:
    layer = LayerSpec(cpu_ms=2.0, cores=1)
    _, records, telemetry = simulate(tmp_path, rate=300, duration_s=2, layer=layer,
                                     input=256, output=8)
    ok = records[records.outcome == "ok"].reset_index(drop=True)
    parts = pd.DataFrame([_parts(h) for h in ok.server_timing])
    assert list(parts.columns) == ["layer", "queue", "prefill", "decode"]
    ttft = parts.layer + parts.queue + parts.prefill
    assert np.allclose(ttft, ok.ttft_ms, atol=2e-3)  # written to a microsecond
    assert np.allclose(ttft + parts.decode, ok.e2e_ms, atol=3e-3)
    assert parts.queue.max() > 10 * parts.queue.min() + 1  # the load made it queue
    budget = time_budget(ok, telemetry)
    assert not budget.notes
    for workload in budget.workloads:
        for band in workload.bands:
            start, stop = next((s, e) for name, s, e in BANDS if name == band.band)
            order = np.argsort(ok[band.metric].to_numpy(), kind="stable")
            first = int(np.floor(start * len(order)))
            members = order[first:max(first + 1, int(np.ceil(stop * len(order))))]
            for name, column in (("hop", "layer"), ("queue", "queue"), ("prefill", "prefill")):
                part = band.part(name)
                assert part is not None and part.resolvable
                assert part.mean_ms == pytest.approx(parts[column][members].mean(), abs=1e-6)
            rest = band.part("unexplained")
            assert rest is not None and abs(rest.mean_ms) < 3e-3


def test_one_request_alone_has_no_queue_and_the_models_prefill(tmp_path: Path) -> None:
    _, records, _ = simulate(tmp_path, rate=0.05, duration_s=2, input=200, output=5,
                             arrival="constant")
    [row] = records.itertuples()
    parts = _parts(row.server_timing)
    engine = Engine(SimConfig().models[0])
    assert "layer" not in parts and parts["queue"] == 0.0
    assert parts["prefill"] == pytest.approx(engine.step_cost.prefill_s(200) * 1e3, abs=1e-3)
