"""Tensor parallelism in the roofline: the model against public 70B measurements at
TP2 / TP4 / TP8 on A100 and H100 (within 25 %, or a gap documented here), decode that
flattens with TP as the measurements do, and TP1 exactly the roofline it was.

The figures come from three public sources:

* LambdaLabsML/vllm-benchmark, `results/prompt_10/<N>x<GPU>-80GB-SXM/
  Meta-Llama-3-70B-Instruct_tp<N>_len2048.json` (H100 runs 2024-09-07 at commit
  a4f9f4371a1ccac781293837fce2bce0cc6d25cc, A100 runs 2024-09-08 at commit
  f093afe94aacfb282ac40fef31c94a0010b37e5e): vLLM's benchmark_serving, BF16, the same 10
  ShareGPT prompts sent at once (input_lens 13, 25, 27, 10, 329, 29, 399, 328, 4, 205 =
  1,369 tokens), vLLM multi-step scheduling (10 tokens per streamed chunk).
  - prefill: the ten prompts are prefilled in one step; the figure is `median_ttft_ms`.
  - decode: the `itls` of the two longest answers (661-741 tokens) after the other
    eight have finished, per 10-token chunk divided by 10; H100 has a stretch where the
    741-token answer runs alone (batch 1), A100 TP2/TP4 only the stretch where the two
    run together (batch 2). Context by then: about 720 tokens.
  Llama-3-70B has Llama-2-70B's layer shapes (80 layers, hidden 8192, 64 heads, 8 KV
  heads, FFN 28672); only its vocabulary (128,256 against 32,000) and so 2 % of its
  weights differ. These runs are the only ones found that cover TP2, TP4 and TP8 on
  both GPUs with one engine and one method.
* NVIDIA/TensorRT-LLM `docs/source/performance.md`, "Low Latency" (TensorRT-LLM v0.5,
  gptSessionBenchmark, no server), A100 GPUs (FP16): LLaMA 70B (its methodology section:
  Llama2-70b), batch 1, TP4, first-token latency 47 ms for 128 input tokens and 377 ms
  for 2,048. Its H100 rows are FP8, which the BF16 profiles do not model.
* https://pytorch.org/blog/pytorch-compile-to-speed-up-inference/ (IBM Research and
  Meta, 2023): Llama-2-70B, 29 ms per token for a single user on 8 A100 GPUs, native
  PyTorch with torch.compile and tensor parallelism (context not stated).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import pytest

from zerohop.sim.config import EngineConfig, ServedModelConfig
from zerohop.sim.cost_model.profiles import Roofline, load_profiles
from zerohop.sim.cost_model.tensor_parallel import TensorParallelCost
from zerohop.sim.engine.engine import Engine

pytestmark = pytest.mark.unit

TOLERANCE = 0.25
SHAREGPT_10 = (13, 25, 27, 10, 329, 29, 399, 328, 4, 205)
LAMBDA = "https://github.com/LambdaLabsML/vllm-benchmark/blob/{commit}/results/prompt_10/"
LAMBDA_H100 = LAMBDA.format(commit="a4f9f4371a1ccac781293837fce2bce0cc6d25cc")
LAMBDA_A100 = LAMBDA.format(commit="f093afe94aacfb282ac40fef31c94a0010b37e5e")
TRTLLM = "https://github.com/NVIDIA/TensorRT-LLM/blob/release/0.5.0/docs/source/performance.md"
PYTORCH = "https://pytorch.org/blog/pytorch-compile-to-speed-up-inference/"

A100_MFU_GAP = (
    "A100's compute_efficiency (0.40) is H100's fraction carried over without an A100 "
    "measurement; this run implies about 0.6 of peak. Raising it would change A100's "
    "TP1 numbers, which this model keeps as they were."
)


@dataclass(frozen=True)
class Cited:
    """One public measurement and the setting the roofline models it in."""

    gpu: str
    model: str
    tp: int
    kind: Literal["prefill_ms", "decode_ms_per_token"]
    value_ms: float
    source: str
    measured: str
    prompt_lens: tuple[int, ...] = ()
    batch: int = 1
    context: int = 720
    gap: str = ""

    def modelled_ms(self) -> float:
        book = load_profiles()
        roofline = Roofline(book.gpu(self.gpu), book.model(self.model), tp=self.tp)
        if self.kind == "prefill_ms":
            return roofline.step_s([(0, n) for n in self.prompt_lens])[0] * 1e3
        return roofline.decode_s(self.batch, self.context) * 1e3


def lambda_prefill(gpu: str, tp: int, value_ms: float, gap: str = "") -> Cited:
    base, folder = (LAMBDA_H100, "H100") if gpu == "h100-sxm" else (LAMBDA_A100, "A100")
    return Cited(
        gpu, "llama-3-70b", tp, "prefill_ms", value_ms,
        source=f"{base}{tp}x{folder}-80GB-SXM/Meta-Llama-3-70B-Instruct_tp{tp}_len2048.json",
        measured="median TTFT of 10 ShareGPT prompts (1,369 tokens) prefilled in one step",
        prompt_lens=SHAREGPT_10, gap=gap,
    )


def lambda_decode(gpu: str, tp: int, value_ms: float, batch: int, itl: str) -> Cited:
    base, folder = (LAMBDA_H100, "H100") if gpu == "h100-sxm" else (LAMBDA_A100, "A100")
    return Cited(
        gpu, "llama-3-70b", tp, "decode_ms_per_token", value_ms,
        source=f"{base}{tp}x{folder}-80GB-SXM/Meta-Llama-3-70B-Instruct_tp{tp}_len2048.json",
        measured=f"itls at batch {batch}, context ~720: {itl} per 10-token chunk",
        batch=batch,
    )


CITED = [
    lambda_prefill("h100-sxm", 2, 218.92),
    lambda_prefill("h100-sxm", 4, 140.56),
    lambda_prefill(
        "h100-sxm", 8, 122.28,
        gap="At TP8 each GPU's GEMMs are small (QKV: 1,280 columns for 1,369 tokens) and "
        "fill the H100's 132 SMs in too few tiles; the model keeps one compute efficiency "
        "per GPU, fitted on one GPU, so it misses that loss (modelled ~26 % low).",
    ),
    lambda_prefill("a100-80gb", 2, 506.39, gap=A100_MFU_GAP),
    lambda_prefill("a100-80gb", 4, 315.17, gap=A100_MFU_GAP),
    # Within 25 % only because the low A100 efficiency offsets the TP8 loss above.
    lambda_prefill("a100-80gb", 8, 218.92),
    lambda_decode("h100-sxm", 2, 28.4, 1, "0.2838-0.2847 s"),
    lambda_decode("h100-sxm", 4, 17.03, 1, "0.1695-0.1711 s"),
    lambda_decode("h100-sxm", 8, 11.25, 1, "0.1121-0.1128 s"),
    lambda_decode("a100-80gb", 2, 48.9, 2, "0.4853-0.4898 s"),
    lambda_decode("a100-80gb", 4, 28.2, 2, "0.2816-0.2836 s"),
    lambda_decode("a100-80gb", 8, 17.5, 2, "0.1739-0.1757 s"),
    lambda_decode("a100-80gb", 8, 16.45, 1, "0.1643-0.1648 s"),
    Cited(
        "a100-80gb", "llama-2-70b", 4, "prefill_ms", 47.0, source=TRTLLM,
        measured="1st token latency, batch 1, input 128 (A100 FP16, TensorRT-LLM v0.5)",
        prompt_lens=(128,),
    ),
    Cited(
        "a100-80gb", "llama-2-70b", 4, "prefill_ms", 377.0, source=TRTLLM,
        measured="1st token latency, batch 1, input 2048 (A100 FP16, TensorRT-LLM v0.5)",
        prompt_lens=(2048,), gap=A100_MFU_GAP,
    ),
    Cited(
        "a100-80gb", "llama-2-70b", 8, "decode_ms_per_token", 29.0, source=PYTORCH,
        measured="per-token latency, single user, 8 A100 (variant and context not stated)",
        context=512,
        gap="Native PyTorch (torch.compile, 2023) reads the weights at about half vLLM's "
        "rate: vLLM decodes the same-shape Llama-3-70B on 8 A100-80GB at 16.45 ms/token "
        "(above), which the model matches.",
    ),
]


def relative_error(figure: Cited) -> float:
    return figure.modelled_ms() / figure.value_ms - 1


def test_each_cited_figure_is_within_25_percent_or_a_documented_gap() -> None:
    wrong = []
    for f in CITED:
        error = relative_error(f)
        within = abs(error) <= TOLERANCE
        if within == bool(f.gap):  # a match marked as a gap is as wrong as a miss
            wrong.append(f"{f.gpu} TP{f.tp} {f.model} {f.kind} {f.value_ms} ms: "
                         f"modelled {f.modelled_ms():.2f} ms ({error:+.0%}), gap={bool(f.gap)}")
    assert not wrong, "\n".join(wrong)


def test_the_figures_cover_prefill_and_decode_at_tp2_tp4_tp8_on_a100_and_h100() -> None:
    for gpu in ("a100-80gb", "h100-sxm"):
        for kind in ("prefill_ms", "decode_ms_per_token"):
            assert {f.tp for f in CITED if (f.gpu, f.kind) == (gpu, kind)} >= {2, 4, 8}
    for f in CITED:
        assert f.source.startswith("https://") and f.measured
    # every decode figure is matched: the TP model's own subject
    assert all(not f.gap for f in CITED if f.kind == "decode_ms_per_token"
               and f.source != PYTORCH)


@pytest.mark.parametrize(("gpu", "batch", "measured_speedup"), [
    ("h100-sxm", 1, 28.4 / 11.25),
    ("a100-80gb", 2, 48.9 / 17.5),
])
def test_decode_speedup_from_tp2_to_tp8_flattens_as_measured(
    gpu: str, batch: int, measured_speedup: float
) -> None:
    book = load_profiles()
    for model in ("llama-3-70b", "llama-2-70b"):
        step = {tp: Roofline(book.gpu(gpu), book.model(model), tp=tp).decode_s(batch, 720)
                for tp in (2, 4, 8)}
        assert step[2] > step[4] > step[8]  # more GPUs still help
        speedup = step[2] / step[8]
        assert speedup < 3.2, f"{gpu} {model}: TP2->TP8 decode {speedup:.2f}x"
        if model == "llama-3-70b":  # the measured model
            assert speedup == pytest.approx(measured_speedup, rel=0.15)


# The roofline's numbers at TP1 before tensor parallelism was modelled: prefill of 2,048
# tokens, decode at batch 1 / 512 and batch 64 / 1,000 tokens of context, a mixed step.
TP1_BEFORE = {
    ("h100-sxm", "llama-3-8b"): (
        0.08648773119741257, 0.00701901063641791, 0.010347483000995025, 0.033854175221831415),
    ("a100-80gb", "llama-3-8b"): (
        0.27296320912410255, 0.011146192070622852, 0.016614746470492072, 0.1060541056553846),
    ("l4", "llama-3.2-3b"): (
        0.2871716286624793, 0.029396351146666666, 0.061886187235555556, 0.10984874748297521),
    ("h200", "llama-3-70b"): (
        0.7446697455362846, 0.03984186702222223, 0.04567229546666667, 0.2917708154663432),
}


@pytest.mark.parametrize(("gpu", "model"), sorted(TP1_BEFORE))
def test_tp1_is_the_roofline_it_was(gpu: str, model: str) -> None:
    book = load_profiles()
    roofline = Roofline(book.gpu(gpu), book.model(model), tp=1)
    assert roofline.tensor_parallel is None
    now = (
        roofline.prefill_s(2048),
        roofline.decode_s(1, 512),
        roofline.decode_s(64, 1000),
        roofline.step_s([(0, 300), (1200, 1), (40, 512)])[0],
    )
    assert now == pytest.approx(TP1_BEFORE[(gpu, model)], rel=1e-12)


def nvlink_cost(tp: int, **kwargs: float) -> TensorParallelCost:
    return TensorParallelCost(tp=tp, layers=80, hidden=8192, dtype_bytes=2,
                              link_gbps=450, hop_latency_us=0.6, **kwargs)


def test_small_allreduces_pay_nccls_ring_latency() -> None:
    # base 6.6 us + 2(tp-1) hops of 0.6 us: 7.8 / 10.2 / 15.0 us, plus a sliver of bytes
    for tp, latency_us in ((2, 7.8), (4, 10.2), (8, 15.0)):
        assert nvlink_cost(tp).allreduce_s(16) * 1e6 == pytest.approx(latency_us, abs=0.01)
    # the same scale as vLLM's custom all-reduce measured on H100 at 32 KB
    # (sgl-project/sglang pull 2904: 8.7 / 9.2 / 11.8 us at TP2 / 4 / 8)
    for tp, measured_us in ((2, 8.7), (4, 9.2), (8, 11.8)):
        assert 0.6 < nvlink_cost(tp).allreduce_s(32768) * 1e6 / measured_us < 1.5


def test_large_allreduces_are_bound_by_the_link() -> None:
    message = 1369 * 8192 * 2  # a prefill step's activations
    for tp in (2, 4, 8):
        wire_s = 2 * (tp - 1) / tp * message / (450e9 * 235 / 300)
        latency_s = (8.4 + 2 * (tp - 1) * 5.7 * 0.6) / 1e6  # NCCL Simple
        assert nvlink_cost(tp).allreduce_s(message) == pytest.approx(wire_s + latency_s)
    pcie = TensorParallelCost(tp=4, layers=80, hidden=8192, dtype_bytes=2,
                              link_gbps=32, hop_latency_us=1.0)
    assert pcie.allreduce_s(message) > 10 * nvlink_cost(4).allreduce_s(message)


def test_a_step_pays_two_allreduces_a_layer_and_the_unshrunk_launches() -> None:
    cost = nvlink_cost(8)
    assert cost.step_s(1) == pytest.approx(160 * cost.allreduce_s(16384) + cost.launch_s)
    assert cost.launch_s == pytest.approx((1 - 1 / 8) * 10 * 80 * 2e-6)
    assert nvlink_cost(2).launch_s < nvlink_cost(8).launch_s
    with pytest.raises(ValueError, match="tp >= 2"):
        nvlink_cost(1)


def test_a_configured_flat_allreduce_cost_replaces_the_model() -> None:
    flat = nvlink_cost(4, flat_allreduce_us=8.0)
    assert flat.step_s(1) == pytest.approx(160 * 8e-6 + flat.launch_s)
    assert flat.step_s(4096) == flat.step_s(1)
    served = ServedModelConfig(model="llama-2-70b", gpu="h100-sxm", tp=4,
                               engine=EngineConfig(tp_allreduce_us_per_layer=8.0))
    engine = Engine(served)
    assert isinstance(engine.step_cost, Roofline)
    assert engine.step_cost.tensor_parallel is not None
    assert engine.step_cost.tensor_parallel.flat_allreduce_us == 8.0


def test_the_engine_models_tensor_parallelism_by_default() -> None:
    engine = Engine(ServedModelConfig(model="llama-2-70b", gpu="a100-80gb", tp=8))
    assert isinstance(engine.step_cost, Roofline)
    tp_cost = engine.step_cost.tensor_parallel
    assert tp_cost is not None and tp_cost.flat_allreduce_us is None
    book = load_profiles()
    assert book.model("llama-2-70b").weight_bytes == pytest.approx(137.96e9)
