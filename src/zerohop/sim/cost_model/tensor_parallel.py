"""What tensor parallelism adds to a step: costs that do not shrink as `tp` grows.

Megatron-style tensor parallelism shards every layer's attention heads and MLP columns
over `tp` GPUs, so the roofline's compute and weight-read terms divide by `tp`. Two
things do not, and they are why measured decode flattens out (Llama-3-70B on H100 under
vLLM: 28.4 / 17.0 / 11.3 ms per token at TP2 / TP4 / TP8, 2.5x from TP2 to TP8 rather
than 4x; the measurements and their sources are in tests/sim/test_tensor_parallel.py):

1. **Two all-reduces per layer per step** (after attention, after the MLP) of the step's
   activations, `tokens x hidden x dtype bytes`, on the critical path (vLLM and
   TensorRT-LLM do not overlap them with compute). Each costs NCCL's own ring model, the
   one NCCL uses to choose its algorithm (NVIDIA/nccl, src/graph/tuning.cc):

       t = base + 2(tp-1) x hop + (2(tp-1)/tp x bytes) / bus bandwidth

   * `base`: the collective's launch and rank handshake, paid by every all-reduce;
   * `hop`: one ring step's latency, the GPU profile's `interconnect_latency_us`
     (NCCL's figures for its low-latency protocol: 0.6 us over NVLink, 1.0 us over PCIe);
   * ring all-reduce sends `2(tp-1)/tp` of the buffer over each GPU's link;
   * bus bandwidth: the profile's per-direction link bandwidth, `interconnect_gbps`
     (A100 NVLink3 300 GB/s, H100 NVLink4 450 GB/s), times 235/300, the share NCCL's
     model allows A100 NVLink (it caps A100 bus bandwidth at 235 GB/s).

   Like NCCL, each message takes the faster of two protocols: LL (base 6.6 us, the hop
   latency, a quarter of the bus bandwidth), which wins for decode's few-kilobyte
   messages, and Simple (base 8.4 us, 5.7x the hop latency -- 3.4 us NVLink, 5.7 us
   PCIe in NCCL's table -- and the full bus bandwidth), which wins for prefill's
   megabytes. For scale, vLLM's custom all-reduce of 32 KB on H100 measures 8.7 / 9.2 /
   11.8 us at TP2 / 4 / 8 (sgl-project/sglang pull 2904); this model gives 7.8 / 10.2 /
   15.0 us. An 80-layer model at TP8 pays 160 x 15 us = 2.4 ms a decode step.

2. **Per-kernel launch cost.** A layer runs about 10 kernels besides its all-reduces
   (vLLM's Llama: two fused add+RMSNorm, QKV GEMM, rotary, KV-cache write, attention,
   output GEMM, gate-up GEMM, SiLU-and-multiply, down GEMM). Each has a fixed cost --
   the launch gap and its ramp up and tail -- of the order of microseconds; 2 us is the
   figure used (chosen within that range, not measured here). On one GPU that cost sits
   inside the fitted efficiencies, which the roofline then divides by `tp` although it
   does not shrink: the step gets back `(1 - 1/tp) x 10 x layers x 2 us` (1.4 ms for 80
   layers at TP8).

With `tp == 1` there is no cost here and the roofline does not use this module.
"""

from __future__ import annotations

from dataclasses import dataclass

ALLREDUCES_PER_LAYER = 2
KERNELS_PER_LAYER = 10
KERNEL_FIXED_US = 2.0
BUS_EFFICIENCY = 235 / 300


@dataclass(frozen=True)
class Protocol:
    """One NCCL protocol's place in the ring model."""

    base_us: float
    hop_factor: float  # x the link's low-latency hop latency
    bandwidth_share: float  # of the bus bandwidth


LOW_LATENCY = Protocol(base_us=6.6, hop_factor=1.0, bandwidth_share=0.25)
BANDWIDTH = Protocol(base_us=8.4, hop_factor=5.7, bandwidth_share=1.0)


class TensorParallelCost:
    """Seconds a step's tensor parallelism adds on `tp` GPUs: the all-reduces of its
    activations and the launch cost the per-GPU shards do not shrink."""

    def __init__(
        self,
        *,
        tp: int,
        layers: int,
        hidden: int,
        dtype_bytes: int,
        link_gbps: float,
        hop_latency_us: float,
        flat_allreduce_us: float | None = None,
    ) -> None:
        if tp < 2:
            raise ValueError(f"tensor parallelism needs tp >= 2, got {tp}")
        self.tp = tp
        self.allreduces = ALLREDUCES_PER_LAYER * layers
        self.flat_allreduce_us = flat_allreduce_us
        self._token_bytes = hidden * dtype_bytes
        self._ring_steps = 2 * (tp - 1)
        self._ring_share = 2 * (tp - 1) / tp
        self._bus_bytes_per_s = link_gbps * 1e9 * BUS_EFFICIENCY
        self._hop_us = hop_latency_us
        self.launch_s = (1 - 1 / tp) * KERNELS_PER_LAYER * layers * KERNEL_FIXED_US / 1e6

    def allreduce_s(self, message_bytes: float) -> float:
        """One all-reduce of `message_bytes`; a flat cost when one is configured."""
        if self.flat_allreduce_us is not None:
            return self.flat_allreduce_us / 1e6
        return min(self._ring_s(p, message_bytes) for p in (LOW_LATENCY, BANDWIDTH))

    def step_s(self, tokens: int) -> float:
        """What a step of `tokens` new tokens pays for running on `tp` GPUs."""
        return self.allreduces * self.allreduce_s(tokens * self._token_bytes) + self.launch_s

    def _ring_s(self, protocol: Protocol, message_bytes: float) -> float:
        latency_us = protocol.base_us + self._ring_steps * protocol.hop_factor * self._hop_us
        bandwidth = self._bus_bytes_per_s * protocol.bandwidth_share
        return latency_us / 1e6 + self._ring_share * message_bytes / bandwidth
