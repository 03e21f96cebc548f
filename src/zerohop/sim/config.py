"""The sim's configuration: one strict pydantic model, loaded from YAML and/or flags.

A config file looks like::

    seed: 7
    max_queue: 64                 # waiting requests per engine before 503/529
    models:
      - name: big
        gpu: h100-sxm
        model: llama-3-70b
        tp: 4
      - name: small
        model: llama-3.2-1b
        engine: {max_num_seqs: 64}
        lora:
          adapters: [{name: sql-lora, rank: 16}]
          max_loras: 1
    faults:
      stall_mid: {probability: 0.01, after: 5, s: 2}
      http_429: {probability: 0.02, retry_after: 1}
    reasoning: {share: 0.3, tokens: 512, sigma: 0.5}   # a reasoning model (answer_plan.py)
    tool_calls: {probability: 0.5, argument_tokens: 12}  # for requests that offer tools
    structured_output: {invalid_share: 0.1}  # JSON-schema requests answered with bare words
    pd: {role: decode, kv_bandwidth_gbps: 50, kv_latency_ms: 0.5}  # sim.pd_roles

Each served model gets its own engine (its own simulated GPUs). Without `models` the
sim serves one model built from `--gpu/--model/--tp`.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from zerohop.sim.cost_model.profiles import load_profiles
from zerohop.sim.ground_truth import KEEP_IN_MEMORY
from zerohop.sim.pd_roles import DEFAULT_KV_BANDWIDTH_GBPS, DEFAULT_KV_LATENCY_MS


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EngineConfig(StrictModel):
    """vLLM-like scheduler and memory knobs, plus the cost model's constants."""

    max_num_seqs: int = Field(default=256, gt=0, description="Running sequences per step")
    max_num_batched_tokens: int = Field(
        default=8192, gt=0, description="Token budget per step (chunked prefill)"
    )
    block_size: int = Field(default=16, gt=0, description="Tokens per KV-cache block")
    enable_prefix_caching: bool = Field(
        default=True,
        description="Reuse the KV blocks of a cached prompt prefix (vLLM V1's default)",
    )
    gpu_memory_utilization: float = Field(default=0.9, gt=0, le=1)
    non_kv_reserve_gib: float = Field(
        default=2.0, ge=0, description="Per-GPU memory kept for activations and CUDA graphs"
    )
    num_gpu_blocks: int | None = Field(
        default=None, gt=0, description="Override the KV-cache size in blocks (tests)"
    )
    max_model_len: int | None = Field(
        default=None, gt=0, description="Default: the model's context"
    )
    step_overhead_ms: float = Field(default=0.6, ge=0, description="Fixed cost of every step")
    tp_allreduce_us_per_layer: float | None = Field(
        default=None,
        ge=0,
        description="Flat cost of each of a layer's two all-reduces, us; "
        "None: modelled from the GPU's interconnect (sim.tensor_parallel)",
    )
    time_scale: float = Field(default=1.0, gt=0, description="Multiply every modelled duration")
    eos_median_tokens: float = Field(
        default=256.0, gt=0, description="Median answer without ignore_eos"
    )
    eos_sigma: float = Field(default=0.6, ge=0, description="Lognormal shape of answer lengths")
    ignore_eos_default: bool = Field(
        default=False, description="Treat every request as ignore_eos (answers are max_tokens long)"
    )
    max_preemptions: int | None = Field(
        default=None,
        ge=0,
        description="A sequence preempted this often is failed with out_of_memory instead of "
        "being recomputed again (engines that give up under KV-cache pressure); "
        "None: recompute forever, like vLLM",
    )
    spec_draft_tokens: int = Field(
        default=0, ge=0, description="Speculative decoding: draft tokens each decode step "
        "proposes (0: off; sim.spec_decode)"
    )
    spec_acceptance: float = Field(
        default=0.7, ge=0, le=1, description="Chance each draft token is accepted, given "
        "the ones before it were"
    )
    spec_draft_ms_per_token: float = Field(
        default=0.05, ge=0, description="The draft model's cost of proposing one token, ms"
    )


class LoraAdapterConfig(StrictModel):
    name: str = Field(min_length=1)
    rank: int = Field(default=16, gt=0)


class LoraConfig(StrictModel):
    adapters: list[LoraAdapterConfig] = Field(default_factory=list)
    max_loras: int = Field(default=4, gt=0, description="Resident adapter slots (LRU)")
    load_ms: float | None = Field(
        default=None, ge=0, description="Cold-load time; default: adapter bytes over PCIe + 5 ms"
    )
    step_overhead_ms: float = Field(default=0.2, ge=0, description="Any adapter in the batch")
    mixed_batch_ms_per_adapter: float = Field(
        default=0.3, ge=0, description="Per extra distinct adapter in one batch"
    )

    @field_validator("adapters", mode="before")
    @classmethod
    def _names_to_adapters(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [{"name": v} if isinstance(v, str) else v for v in value]
        return value


def _known(what: str, value: str, names: Collection[str]) -> str:
    """A profile name checked against the book, so a typo names the choices."""
    if value not in names:
        raise ValueError(f"unknown {what} {value!r}; known: {', '.join(sorted(names))}")
    return value


class ServedModelConfig(StrictModel):
    name: str | None = Field(default=None, description="Served model name; default: the HF id")
    aliases: list[str] = Field(default_factory=list, description="Other accepted names")
    gpu: str = "h100-sxm"
    model: str = "llama-3-8b"
    tp: int = Field(default=1, gt=0)
    engine: EngineConfig = Field(default_factory=EngineConfig)
    lora: LoraConfig = Field(default_factory=LoraConfig)

    @field_validator("gpu")
    @classmethod
    def _known_gpu(cls, value: str) -> str:
        return _known("gpu", value, load_profiles().gpus)

    @field_validator("model")
    @classmethod
    def _known_model(cls, value: str) -> str:
        return _known("model", value, load_profiles().models)

    def served_name(self) -> str:
        return self.name or load_profiles().model(self.model).hf_id


class FaultRule(StrictModel):
    """Probability per request of one fault, with its parameters (see faults.py)."""

    model_config = ConfigDict(extra="allow")
    probability: float = Field(ge=0, le=1)


class ReasoningConfig(StrictModel):
    """A share of chat/messages requests think before answering (answer_plan.py)."""

    share: float = Field(
        default=0.0, ge=0, le=1, description="Share of requests that reason before answering"
    )
    tokens: int = Field(default=256, gt=0, description="Median thinking length in tokens")
    sigma: float = Field(
        default=0.5, ge=0, description="Lognormal shape of thinking lengths (0: always `tokens`)"
    )


class ToolCallConfig(StrictModel):
    """Requests that offer `tools` are answered with a tool call (answer_plan.py)."""

    probability: float = Field(
        default=0.0, ge=0, le=1, description="Chance a request with `tools` gets a tool call"
    )
    argument_tokens: int = Field(
        default=12, gt=0, description="Tokens of the call's JSON arguments"
    )


class StructuredOutputConfig(StrictModel):
    """Requests that ask for a JSON schema are answered with a document that follows it
    (answer_plan.py), except a share that answers with bare words."""

    invalid_share: float = Field(
        default=0.0, ge=0, le=1,
        description="Share of structured-output requests answered with text that is not JSON",
    )


class PdConfig(StrictModel):
    """Prefill/decode disaggregation (sim.pd_roles): this instance's role and the
    modelled KV transfer a decode instance waits for."""

    role: Literal["prefill", "decode"] | None = Field(
        default=None, description="prefill | decode; None: a plain instance")
    kv_bandwidth_gbps: float = Field(
        default=DEFAULT_KV_BANDWIDTH_GBPS, gt=0,
        description="The KV link's bandwidth, GB/s (1e9 B/s)")
    kv_latency_ms: float = Field(
        default=DEFAULT_KV_LATENCY_MS, ge=0, description="Fixed cost of each KV pull, ms")


class SimConfig(StrictModel):
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    seed: int = 0
    max_queue: int | None = Field(
        default=None, ge=0, description="Waiting requests per engine before HTTP 503/529"
    )
    api_key: str | None = Field(default=None, description="Require this bearer/x-api-key")
    models: list[ServedModelConfig] = Field(default_factory=lambda: [ServedModelConfig()])
    faults: dict[str, FaultRule] = Field(default_factory=dict)
    reasoning: ReasoningConfig = Field(default_factory=ReasoningConfig)
    tool_calls: ToolCallConfig = Field(default_factory=ToolCallConfig)
    structured_output: StructuredOutputConfig = Field(default_factory=StructuredOutputConfig)
    answer_divergence: float = Field(
        default=0.0, ge=0, le=1, description="Share of seeded temperature-0 answers decoded "
        "beside other sequences that change one token (modelled: sim/answers/greedy_answer.py)")
    pd: PdConfig = Field(default_factory=PdConfig)
    ground_truth: Path | None = None
    ground_truth_token_lags: bool = Field(
        default=False,
        description="Write every token's emission lag and write time into the ground truth",
    )
    ground_truth_keep: int = Field(
        default=KEEP_IN_MEMORY, ge=1, description="The last N ground-truth records kept in "
        "memory for GET /zerohop/ground_truth (the file keeps every one)"
    )
    timer_spin_us: int = Field(
        default=300, ge=0, description="Busy-wait at most this close to a step's end for a "
        "precise wake (the step timer learns how close it needs: sim/engine/step_timer.py)"
    )

    @field_validator("faults")
    @classmethod
    def _known_faults(cls, value: dict[str, FaultRule]) -> dict[str, FaultRule]:
        from zerohop.sim.faults import parse_fault_rule

        for name, rule in value.items():
            parse_fault_rule(name, rule.model_extra or {})  # raises ValueError naming it
        return value

    @field_validator("models")
    @classmethod
    def _unique_names(cls, value: list[ServedModelConfig]) -> list[ServedModelConfig]:
        if not value:
            raise ValueError("at least one model is required")
        seen: set[str] = set()
        for served in value:
            for name in [served.served_name(), *served.aliases]:
                if name in seen:
                    raise ValueError(f"served model name {name!r} is used twice")
                seen.add(name)
            for adapter in served.lora.adapters:
                if adapter.name in seen:
                    raise ValueError(f"adapter name {adapter.name!r} clashes with a model")
                seen.add(adapter.name)
        return value


class ConfigError(ValueError):
    """A config problem, already phrased for the user (field named)."""


def load_config(path: Path | None, overrides: dict[str, Any]) -> SimConfig:
    """Read the YAML file (if any), apply flag overrides, validate once."""
    data: dict[str, Any] = {}
    if path is not None:
        try:
            loaded = yaml.safe_load(path.read_text("utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"cannot read config {path}: {exc}") from exc
        if loaded is not None and not isinstance(loaded, dict):
            raise ConfigError(f"config {path}: top level must be a mapping")
        data = dict(loaded or {})
    model_overrides = {k: v for k, v in overrides.items() if k in _MODEL_FLAGS and v is not None}
    engine_overrides = {k: v for k, v in overrides.items() if k in _ENGINE_FLAGS and v is not None}
    top = {
        k: v
        for k, v in overrides.items()
        if k not in _MODEL_FLAGS and k not in _ENGINE_FLAGS and k not in _NESTED_FLAGS
        and v is not None
    }
    data.update(top)
    for flag, (section, key) in _NESTED_FLAGS.items():
        if overrides.get(flag) is not None:
            data[section] = {**dict(data.get(section) or {}), key: overrides[flag]}
    if model_overrides or engine_overrides:
        models = [dict(m) for m in (data.get("models") or [{}])]
        if model_overrides and len(models) != 1:
            raise ConfigError(
                "--gpu/--model/--tp/--served-model-name apply to a single model; "
                "the config lists several: set them per model in the file"
            )
        for served in models:  # engine flags (--time-scale, ...) apply to every model
            served.update(model_overrides)
            if engine_overrides:
                served["engine"] = {**dict(served.get("engine") or {}), **engine_overrides}
        data["models"] = models
    try:
        return SimConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_describe(exc)) from None


_MODEL_FLAGS = {"gpu", "model", "tp", "name"}
# flags that set one key of a section (--reasoning-share: reasoning.share)
_NESTED_FLAGS = {
    "reasoning_share": ("reasoning", "share"),
    "reasoning_tokens": ("reasoning", "tokens"),
    "tool_call_probability": ("tool_calls", "probability"),
    "invalid_json_share": ("structured_output", "invalid_share"),
    "pd_role": ("pd", "role"),
    "kv_bandwidth_gbps": ("pd", "kv_bandwidth_gbps"),
    "kv_latency_ms": ("pd", "kv_latency_ms"),
}
_ENGINE_FLAGS = {
    "max_num_seqs", "max_num_batched_tokens", "num_gpu_blocks", "time_scale",
    "enable_prefix_caching", "spec_draft_tokens", "spec_acceptance",
}


def _describe(exc: ValidationError) -> str:
    lines = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        lines.append(f"{where}: {err['msg']}")
    return "invalid sim config: " + "; ".join(lines)
