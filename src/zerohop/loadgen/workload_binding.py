"""Bind a Locust user class to its workload spec, planner, API adapter and client.

One binding per (process, user class), built on first use and cached on the process
runtime: the spec from the YAML files, the model to ask for (the spec's, `--model`, or
the target's first model), the prompt-size calibration measured against the target's
own usage counts, and a planner seeded per worker.
"""

from __future__ import annotations

import json
import logging
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from zerohop.http_stream import Timeouts
from zerohop.loadgen import options as opt
from zerohop.loadgen.client import LLMClient, RequestSpec
from zerohop.loadgen.runtime import runtime_of
from zerohop.policy import client_timeouts
from zerohop.protocols import GenerationRequest, api_key_from_env, create_adapter
from zerohop.workloads.spec import WorkloadError, load_workload_file

log = logging.getLogger("zerohop")

REPO_WORKLOADS = Path(__file__).resolve().parents[3] / "workloads"


def load_workloads(files: Sequence[str]) -> list[Any]:
    """Every workload spec in the given files (WorkloadError names file and field)."""
    specs: list[Any] = []
    for name in files:
        path = Path(name)
        if not path.exists():
            raise WorkloadError(f"{path}: workload file not found")
        specs.extend(load_workload_file(path).workloads)
    return specs


def check_inputs(spec: Any) -> None:
    """What a spec points at must be readable before a run starts (a trace, today)."""
    if spec.kind == "trace_replay":
        from zerohop.workloads.traces import read_trace

        read_trace(spec.trace, spec.resolved_format)


@dataclass
class WorkloadBinding:
    spec: Any
    api: str
    model: str
    planner: Any
    open_loop: bool

    def next_spec(self) -> RequestSpec:
        return to_request_spec(self.planner.next_request(), self.model)

    def think_time_s(self) -> float:
        return float(self.planner.think_time_s())

    def new_client(self, environment: Any) -> LLMClient:
        return LLMClient(
            environment.host,
            create_adapter(self.api),
            api_key=api_key_from_env(self.api),
            timeouts=client_timeouts(self.spec.policy, Timeouts(
                ttft_s=float(opt.option(environment, "zh_ttft_timeout")),
                stall_s=float(opt.option(environment, "zh_stall_timeout")),
                total_s=float(opt.option(environment, "zh_total_timeout")),
            )),
            anchor=runtime_of(environment).anchor,
            reactor=runtime_of(environment).reactor(),
        )


def binding_for(environment: Any, user_class: type) -> WorkloadBinding:
    rt = runtime_of(environment)
    cache: dict[str, WorkloadBinding] = rt.extras.setdefault("bindings", {})
    key = user_class.__name__
    if key not in cache:
        with rt.calibration_lock():
            if key not in cache:
                cache[key] = _build_binding(environment, user_class)
    return cache[key]


def _build_binding(environment: Any, user_class: type) -> WorkloadBinding:
    from zerohop.workloads.plans import make_planner

    spec = _with_rate_override(environment, user_class, spec_for(environment, user_class))
    api = spec.api or opt.option(environment, "zh_api")
    model = spec.model or opt.option(environment, "zh_model") or first_model(environment.host)
    index, count = worker_position(environment)
    seed = spec.seed if spec.seed is not None else int(opt.option(environment, "zh_seed"))
    calibration = calibration_for(environment, api, model)
    planner = make_planner(spec, seed=seed, worker_index=index, worker_count=count,
                           calibration=calibration, default_api=api)
    open_loop = getattr(spec.load, "kind", "closed") != "closed"
    return WorkloadBinding(spec=spec, api=api, model=model, planner=planner, open_loop=open_loop)


def uses_default_file(environment: Any, user_class: type) -> bool:
    """True when no --workload file holds a workload of this class's kind."""
    kind = user_class.workload_kind  # type: ignore[attr-defined]
    return all(spec.kind != kind for spec in load_workloads(opt.option(environment, "zh_workload")))


def spec_for(environment: Any, user_class: type) -> Any:
    kind = user_class.workload_kind  # type: ignore[attr-defined]
    for spec in load_workloads(opt.option(environment, "zh_workload")):
        if spec.kind == kind:
            return spec
    default = Path(user_class.default_workload_file)  # type: ignore[attr-defined]
    if not default.is_absolute():
        default = REPO_WORKLOADS / default
    specs = [s for s in load_workload_file(default).workloads if s.kind == kind]
    if not specs:
        raise WorkloadError(f"{default}: no workload of kind {kind!r}")
    return specs[0]


def _with_rate_override(environment: Any, user_class: type, spec: Any) -> Any:
    """`--rate R`: every non-trace workload becomes open-loop Poisson at its weight's share
    of R (a derived spec; the validated one is not changed)."""
    rate = float(opt.option(environment, "zh_rate_override") or 0.0)
    if rate <= 0 or spec.kind == "trace_replay":
        return spec
    from zerohop.workloads.spec import OpenLoad

    weights = [getattr(c, "weight", 1) for c in environment.user_classes
               if getattr(c, "workload_kind", "") not in ("", "trace_replay")]
    share = getattr(user_class, "weight", 1) / max(sum(weights), 1)
    return spec.model_copy(update={"load": OpenLoad(kind="open", rate_rps=rate * share)})


def worker_position(environment: Any) -> tuple[int, int]:
    """(index, count) of this process among the processes that generate load."""
    runner = environment.runner
    index = max(int(getattr(runner, "worker_index", 0) or 0), 0)
    count = int(getattr(environment.parsed_options, "zh_worker_count", 0) or 0) \
        if getattr(environment, "parsed_options", None) is not None else 0
    return index, max(count, index + 1, 1)


def first_model(host: str) -> str:
    """The target's first model from /v1/models (what a user would pick by default)."""
    url = host.rstrip("/") + "/v1/models"
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            data = json.loads(resp.read())
        return str(data["data"][0]["id"])
    except Exception as exc:
        raise WorkloadError(
            f"no model given and {url} did not list one ({type(exc).__name__}: {exc}); "
            "pass --model"
        ) from exc


def calibration_for(environment: Any, api: str, model: str) -> Any:
    """Measure how many tokens the target counts for our generated text: two probe
    requests of known size, their usage.prompt_tokens, a linear fit. Cached per (api,
    model) in this process."""
    from zerohop.workloads.prompts import PromptBuilder, TokenCalibration

    rt = runtime_of(environment)
    cache: dict[tuple[str, str], Any] = rt.extras.setdefault("calibrations", {})
    if (api, model) in cache:
        return cache[(api, model)]
    adapter = create_adapter(api)
    client = LLMClient(environment.host, adapter, api_key=api_key_from_env(api),
                       timeouts=Timeouts(ttft_s=120, stall_s=60, total_s=300), anchor=rt.anchor,
                       reactor=rt.reactor())
    builder = PromptBuilder(seed=99)
    rng = np.random.default_rng(99)
    points: list[tuple[int, int]] = []
    try:
        for units in (64, 512):
            text = builder.build_text(units, rng)
            gen = GenerationRequest(model=model, max_tokens=1, prompt=text)
            record = client.execute(RequestSpec(workload="calibration", generation=gen))
            if record.input_tokens:
                points.append((units, int(record.input_tokens)))
    finally:
        client.close()
    calibration = TokenCalibration.fit(points) if len(points) >= 2 else None
    if calibration is None:
        log.warning("zerohop: the target reported no prompt usage; prompt sizes are estimates")
    cache[(api, model)] = calibration
    return calibration


def to_request_spec(planned: Any, default_model: str, *, scheduled_perf_ns: int | None = None
                    ) -> RequestSpec:
    """A planner's PlannedRequest → what the client sends."""
    model = planned.adapter or planned.model or default_model
    gen = GenerationRequest(
        model=model,
        max_tokens=int(planned.max_tokens),
        prompt=planned.prompt,
        prompt_token_ids=planned.token_ids,
        messages=planned.messages,
        temperature=float(planned.temperature),
        ignore_eos=bool(planned.ignore_eos),
    )
    return RequestSpec(
        workload=planned.workload,
        generation=gen,
        adapter=planned.adapter,
        target_input_tokens=planned.target_input_tokens,
        scheduled_perf_ns=scheduled_perf_ns,
    )
