"""GPU and model profiles, and the roofline that turns a batch into a step time.

The numbers live in `zerohop/data/profiles.yaml` with their sources. This module only
loads them (strict pydantic models) and does the arithmetic:

* prefill (many tokens per sequence) is compute-bound:
  FLOPs ÷ (peak dense TFLOP/s × tp × compute_efficiency);
* decode (one token per sequence) is bandwidth-bound:
  (weight bytes + KV bytes read) ÷ (HBM GB/s × tp × bandwidth_efficiency);
* a step costs the larger of the two, plus a fixed per-step overhead (scheduler, kernel
  launches, sampling) and, with tensor parallelism, what `tp` does not divide: the
  all-reduces over the GPU's interconnect and the per-kernel launch cost
  (`sim.tensor_parallel`).
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from zerohop.sim.cost_model.step_cost import Chunk, StepCostModel
from zerohop.sim.cost_model.tensor_parallel import TensorParallelCost

GIB = 1024**3
MIB = 1024**2


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class GpuProfile(StrictModel):
    """One GPU's datasheet figures plus the achievable fractions the sim uses."""

    display_name: str = Field(description="Name as NVML/DCGM reports it (modelName label)")
    memory_mib: int = Field(gt=0, description="Framebuffer as NVML reports it, MiB")
    bf16_dense_tflops: float = Field(gt=0, description="Peak dense BF16 tensor TFLOP/s")
    hbm_gbps: float = Field(gt=0, description="Peak memory bandwidth, GB/s (1e9 B/s)")
    pcie_gbps: float = Field(gt=0, description="Host link bandwidth per direction, GB/s")
    interconnect_gbps: float = Field(gt=0, description="GPU-GPU (NVLink or PCIe) GB/s")
    interconnect_latency_us: float = Field(
        gt=0, description="GPU-GPU latency of one all-reduce ring step, us"
    )
    tdp_w: float = Field(gt=0)
    idle_w: float = Field(gt=0)
    sm_clock_max_mhz: int = Field(gt=0)
    sm_clock_idle_mhz: int = Field(gt=0)
    compute_efficiency: float = Field(gt=0, le=1, description="Achievable MFU in prefill")
    bandwidth_efficiency: float = Field(gt=0, le=1, description="Achievable MBU in decode")
    sources: list[str] = Field(default_factory=list)


class ModelProfile(StrictModel):
    """A transformer's shape (from its Hugging Face config.json)."""

    hf_id: str
    params_b: float = Field(gt=0, description="Parameters, billions")
    layers: int = Field(gt=0)
    hidden: int = Field(gt=0)
    intermediate: int = Field(gt=0)
    heads: int = Field(gt=0)
    kv_heads: int = Field(gt=0)
    head_dim: int = Field(gt=0)
    vocab: int = Field(gt=0)
    max_position: int = Field(gt=0, description="Native context length")
    dtype_bytes: int = Field(default=2, gt=0, description="Bytes per weight/KV element")
    sources: list[str] = Field(default_factory=list)

    @property
    def weight_bytes(self) -> float:
        return self.params_b * 1e9 * self.dtype_bytes

    @property
    def kv_bytes_per_token(self) -> int:
        """K and V for every layer (all tensor-parallel shards together)."""
        return 2 * self.layers * self.kv_heads * self.head_dim * self.dtype_bytes

    def lora_bytes(self, rank: int) -> int:
        """Size of a LoRA adapter on all attention and MLP projections."""
        attn = 2 * (self.hidden + self.heads * self.head_dim)  # q and o
        attn += 2 * (self.hidden + self.kv_heads * self.head_dim)  # k and v
        mlp = 3 * (self.hidden + self.intermediate)  # gate, up, down
        return rank * self.layers * (attn + mlp) * self.dtype_bytes


class MeasuredFigure(StrictModel):
    """A public measurement the model is checked against (tests use these)."""

    gpu: str
    model: str
    tp: int = 1
    kind: Literal["prefill_batch_ms", "decode_ms_per_token"]
    prompt_lens: list[int] = Field(
        default_factory=list, description="prefill_batch_ms: prompts prefilled in one step"
    )
    context_tokens: int = Field(0, description="decode_ms_per_token: context length")
    value_ms: float = Field(gt=0)
    source: str

    def modelled_ms(self, roofline: Roofline) -> float:
        """What the roofline predicts for this measurement's setting."""
        if self.kind == "prefill_batch_ms":
            return roofline.step_s([(0, n) for n in self.prompt_lens])[0] * 1e3
        return roofline.decode_s(1, self.context_tokens) * 1e3


class ProfileBook(StrictModel):
    gpus: dict[str, GpuProfile]
    models: dict[str, ModelProfile]
    measured: list[MeasuredFigure] = Field(default_factory=list)

    def gpu(self, name: str) -> GpuProfile:
        try:
            return self.gpus[name]
        except KeyError:
            raise KeyError(f"unknown gpu {name!r}; known: {', '.join(sorted(self.gpus))}") from None

    def model(self, name: str) -> ModelProfile:
        try:
            return self.models[name]
        except KeyError:
            raise KeyError(
                f"unknown model {name!r}; known: {', '.join(sorted(self.models))}"
            ) from None


@functools.cache
def load_profiles() -> ProfileBook:
    """The profiles shipped with zerohop (parsed once per process)."""
    text = resources.files("zerohop").joinpath("data/profiles.yaml").read_text("utf-8")
    return parse_profiles(yaml.safe_load(text))


def parse_profiles(data: Any) -> ProfileBook:
    return ProfileBook.model_validate(data)


class Roofline(StepCostModel):
    """Step time of a batch on `tp` GPUs of one kind running one model: the engine's
    default step-cost model."""

    def __init__(
        self,
        gpu: GpuProfile,
        model: ModelProfile,
        *,
        tp: int = 1,
        step_overhead_ms: float = 0.6,
        tp_allreduce_us_per_layer: float | None = None,
    ) -> None:
        self.gpu = gpu
        self.model = model
        self.tp = tp
        self.flops_per_s = gpu.bf16_dense_tflops * 1e12 * tp * gpu.compute_efficiency
        self.bytes_per_s = gpu.hbm_gbps * 1e9 * tp * gpu.bandwidth_efficiency
        self.overhead_s = step_overhead_ms / 1e3
        self.tensor_parallel = None if tp == 1 else TensorParallelCost(
            tp=tp,
            layers=model.layers,
            hidden=model.hidden,
            dtype_bytes=model.dtype_bytes,
            link_gbps=gpu.interconnect_gbps,
            hop_latency_us=gpu.interconnect_latency_us,
            flat_allreduce_us=tp_allreduce_us_per_layer,
        )
        self._linear_flops_per_token = 2.0 * model.params_b * 1e9
        self._attn_flops_coeff = 4.0 * model.layers * model.heads * model.head_dim
        self._kv_bytes = model.kv_bytes_per_token
        self._weights = model.weight_bytes
        self._hidden_bytes = 2 * model.hidden * model.dtype_bytes * model.layers

    def batch_s(
        self, decodes: int, decode_context: int, chunks: list[Chunk]
    ) -> tuple[float, float, float]:
        # a decode's one token attends to its context and itself, and reads their KV
        new_tokens = decodes
        attn_flops = self._attn_flops_coeff * (decode_context + decodes)
        kv_read = decode_context + decodes
        for context, new in chunks:
            new_tokens += new
            # each new token attends to the context plus the new tokens before it
            attn_flops += self._attn_flops_coeff * new * (context + (new + 1) / 2)
            kv_read += context + new
        flops = self._linear_flops_per_token * new_tokens + attn_flops
        mem_bytes = self._weights + self._kv_bytes * kv_read + self._hidden_bytes * new_tokens
        compute_s = flops / self.flops_per_s
        memory_s = mem_bytes / self.bytes_per_s
        step = max(compute_s, memory_s) + self.overhead_s
        if self.tensor_parallel is not None:
            step += self.tensor_parallel.step_s(new_tokens)
        return step, compute_s, memory_s
