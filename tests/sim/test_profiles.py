"""Profiles and the roofline: the H100 + Llama-3-8B figures match the cited
measurements (within 25%), memory and scaling behave as the physics says."""

from __future__ import annotations

import pytest

from zerohop.sim.config import ServedModelConfig
from zerohop.sim.cost_model.profiles import Roofline, load_profiles
from zerohop.sim.engine.engine import Engine
from zerohop.sim.engine.kv_cache import kv_capacity_blocks

pytestmark = pytest.mark.unit


def test_every_profile_loads_and_cites_a_source() -> None:
    book = load_profiles()
    assert {"h100-sxm", "h200", "a100-80gb", "l4"} <= set(book.gpus)
    assert {"llama-3-8b", "llama-3-70b"} <= set(book.models)
    for gpu in book.gpus.values():
        assert gpu.sources, gpu.display_name
    for model in book.models.values():
        assert model.sources, model.hf_id


def test_h100_llama3_8b_within_25_percent_of_cited_measurements() -> None:
    book = load_profiles()
    kinds = set()
    for figure in book.measured:
        roofline = Roofline(book.gpu(figure.gpu), book.model(figure.model), tp=figure.tp)
        modelled = figure.modelled_ms(roofline)
        assert abs(modelled - figure.value_ms) / figure.value_ms <= 0.25, (
            f"{figure.kind}: modelled {modelled:.2f} ms vs measured {figure.value_ms} ms"
        )
        assert figure.source
        if figure.gpu == "h100-sxm" and figure.model == "llama-3-8b":
            kinds.add(figure.kind)
    assert kinds == {"prefill_batch_ms", "decode_ms_per_token"}


def test_prefill_is_compute_bound_and_decode_bandwidth_bound() -> None:
    book = load_profiles()
    r = Roofline(book.gpu("h100-sxm"), book.model("llama-3-8b"))
    _, compute_s, memory_s = r.step_s([(0, 4096)])
    assert compute_s > memory_s
    _, compute_s, memory_s = r.step_s([(500, 1)] * 8)
    assert memory_s > compute_s
    # prefill time roughly doubles with the prompt; decode barely moves with batch 1->8
    assert 1.8 < r.prefill_s(4096) / r.prefill_s(2048) < 2.3
    assert r.decode_s(8, 500) < 1.2 * r.decode_s(1, 500)
    assert r.decode_s(256, 1000) > 2 * r.decode_s(1, 1000)


def test_faster_memory_means_faster_decode() -> None:
    book = load_profiles()
    h100 = Roofline(book.gpu("h100-sxm"), book.model("llama-3-8b"))
    h200 = Roofline(book.gpu("h200"), book.model("llama-3-8b"))
    l4 = Roofline(book.gpu("l4"), book.model("llama-3-8b"))
    assert h200.decode_s(1, 512) < h100.decode_s(1, 512) < l4.decode_s(1, 512)
    # same compute peak: prefill about equal on H100 and H200
    assert h200.prefill_s(2048) == pytest.approx(h100.prefill_s(2048), rel=0.05)


def test_kv_capacity_follows_memory_minus_weights() -> None:
    book = load_profiles()
    gpu, model = book.gpu("h100-sxm"), book.model("llama-3-8b")
    blocks = kv_capacity_blocks(
        gpu, model, tp=1, block_size=16, gpu_memory_utilization=0.9, non_kv_reserve_gib=2.0
    )
    tokens = blocks * 16
    # (81,559 MiB * 0.9 - 2 GiB - 16.06 GB) / 128 KiB per token = 448k tokens
    assert 440_000 < tokens < 456_000
    smaller = kv_capacity_blocks(
        gpu, model, tp=1, block_size=16, gpu_memory_utilization=0.5, non_kv_reserve_gib=2.0
    )
    assert smaller < blocks


def test_70b_needs_tensor_parallelism_on_80gb() -> None:
    with pytest.raises(ValueError, match="does not fit"):
        Engine(ServedModelConfig(model="llama-3-70b", gpu="h100-sxm", tp=1))
    engine = Engine(ServedModelConfig(model="llama-3-70b", gpu="h100-sxm", tp=4))
    assert engine.pool.num_blocks > 0
    single = Roofline(engine.gpu, engine.model, tp=2)
    quad = Roofline(engine.gpu, engine.model, tp=4)
    assert quad.decode_s(1, 512) < single.decode_s(1, 512)
