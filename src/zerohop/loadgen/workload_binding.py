"""Bind a Locust user class to its workload spec, planner, API adapter and client.

One binding per (process, user class), built on first use and cached on the process
runtime: the spec from the YAML files, the model to ask for (the spec's, `--model`, or
the target's first model), how prompts are sized on this target (prompt_sizing.py),
and a planner seeded per worker.
"""

from __future__ import annotations

import json
import logging
import urllib.request
import zlib
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from zerohop.client.api_adapters import create_api_adapter
from zerohop.client.api_request import to_request_spec
from zerohop.client.arms import ArmAssigner
from zerohop.client.http_stream import Timeouts
from zerohop.client.llm_client import LLMClient, RequestSpec
from zerohop.client.policy import client_timeouts
from zerohop.client.protocols import api_key_from_env
from zerohop.client.structured_output import request_format
from zerohop.core.apis import ApiName
from zerohop.loadgen import options as opt
from zerohop.loadgen.prompt_sizing import (
    SIZED_BY_TOKEN_IDS,
    PromptSizing,
    choose_sizing,
    probe_points,
    probe_tokenize,
    sizing_from_probes,
)
from zerohop.loadgen.runtime import runtime_of
from zerohop.workloads.errors import WorkloadError
from zerohop.workloads.inputs import default_workload, load_workloads
from zerohop.workloads.schema.image_spec import ImageSource

log = logging.getLogger("zerohop")


@dataclass
class WorkloadBinding:
    spec: Any
    api: str
    model: str
    planner: Any
    open_loop: bool
    prompt_token_source: str | None = None  # which method sized the prompts
    # an interleaved comparison (`--arm-hosts`): each request's arm, drawn with the seed
    arms: ArmAssigner | None = None
    arm_urls: dict[str, str] = field(default_factory=dict)
    images: ImageSource | None = None  # a workload's `images`, drawn per request

    def next_spec(self) -> RequestSpec:
        return self.request_spec(self.planner.next_request())

    def request_spec(self, planned: Any, scheduled_perf_ns: int | None = None) -> RequestSpec:
        """What the client sends for `planned`, shaped for this binding's API."""
        spec = to_request_spec(planned, self.api, self.model,
                               scheduled_perf_ns=scheduled_perf_ns)
        spec.prompt_token_source = self.prompt_token_source
        schema = getattr(self.spec, "response_format", None)
        if schema is not None:  # structured output: asked for, then judged
            spec.generation.response_format = request_format(schema, self.spec.name)
            spec.response_schema = schema
        if self.images is not None:
            spec.generation.images = self.images.next_images()
        if self.arms is not None:  # a session's turns share the arm of its first
            spec.arm = self.arms.next_arm(getattr(planned, "session_id", None))
        return spec

    def think_time_s(self) -> float:
        return float(self.planner.think_time_s())

    def new_client(self, environment: Any) -> LLMClient:
        return LLMClient(
            environment.host,
            create_api_adapter(self.api),
            api_key=api_key_from_env(self.api),
            timeouts=client_timeouts(self.spec.policy, _timeouts(opt.locust_options(environment))),
            anchor=runtime_of(environment).anchor,
            reactor=runtime_of(environment).reactor(),
            arm_urls=self.arm_urls,
        )


def _timeouts(own: opt.LocustOptions) -> Timeouts:
    return Timeouts(ttft_s=own.ttft_timeout, stall_s=own.stall_timeout,
                    total_s=own.total_timeout)


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
    from zerohop.loadgen.selection import fitted_spec
    from zerohop.workloads.kind_planner import make_workload_planner
    from zerohop.workloads.planners.worker_load import worker_setup

    spec = _with_load_override(environment, user_class, fitted_spec(
        environment, user_class, spec_for(environment, user_class)))
    settings = opt.run_settings(environment)
    api = spec.api or settings.api
    model = spec.model or settings.model or first_model(environment.host)
    index, count = worker_position(environment)
    seed = spec.seed if spec.seed is not None else settings.seed
    if spec.prompt_format == "token_ids":
        calibration, source = None, SIZED_BY_TOKEN_IDS
    else:
        sizing = sizing_for(environment, api, model)
        calibration, source = sizing.calibration, sizing.source
    planner = make_workload_planner(spec, worker_setup(
        spec, seed=seed, worker_index=index, worker_count=count, calibration=calibration,
        default_api=cast("ApiName", api)))  # one of --api's choices
    open_loop = getattr(spec.load, "kind", "closed") != "closed"
    arm_urls = opt.arm_hosts(environment)
    arms = ArmAssigner(list(arm_urls), f"{seed}:{spec.name}:{index}") if arm_urls else None
    images = None if spec.images is None else ImageSource(spec.images, np.random.default_rng(
        zlib.crc32(f"{seed}:{spec.name}:{index}:images".encode())))
    return WorkloadBinding(spec=spec, api=api, model=model, planner=planner, open_loop=open_loop,
                           prompt_token_source=source, arms=arms, arm_urls=arm_urls,
                           images=images)


def spec_for(environment: Any, user_class: type) -> Any:
    """The workload a user class runs: its own (a class made by `selection.workload_class`,
    as every class of a run with the hooks is), else, for a locustfile's class used
    directly, the first workload of its kind in the --workload files or its default
    file."""
    own = getattr(user_class, "workload_spec", None)
    if own is not None:
        return own
    kind = user_class.workload_kind  # type: ignore[attr-defined]
    for spec in load_workloads(opt.run_settings(environment).workloads):
        if spec.kind == kind:
            return spec
    return default_workload(user_class.workload_kind,  # type: ignore[attr-defined]
                            user_class.default_workload_file)  # type: ignore[attr-defined]


def _with_load_override(environment: Any, user_class: type, spec: Any) -> Any:
    """The command line's load replaces the files' (a derived spec; the validated one is
    not changed). `--rate R`: R is the run's total offered rate, split by weight over
    every workload it runs; each becomes open-loop Poisson at its share, but a trace
    replay, which keeps its trace's arrivals (their bursts and lulls) with its clock
    scaled so that its mean rate is its share. `--users N` (and a layer comparison's one
    user): closed loop, N users by weight, so an open-loop or trace workload is sent by
    its users, one request after another, not by its file's clock."""
    from zerohop.loadgen.selection import users_by_weight
    from zerohop.workloads.schema.load_spec import ClosedLoad, OpenLoad

    rate = opt.run_settings(environment).rate or 0.0
    if rate <= 0:
        if users_by_weight(environment) and getattr(spec.load, "kind", "closed") != "closed":
            return spec.model_copy(update={"load": ClosedLoad(kind="closed")})
        return spec
    weights = [getattr(c, "weight", 1) for c in environment.user_classes
               if getattr(c, "workload_kind", "")]
    share = rate * getattr(user_class, "weight", 1) / max(sum(weights), 1)
    if spec.kind == "trace_replay":
        return _trace_at_rate(spec, share, _load_horizon_s(environment, rate))
    return spec.model_copy(update={"load": OpenLoad(kind="open", rate_rps=share)})


def _load_horizon_s(environment: Any, rate: float) -> float | None:
    """How long the load runs at `rate`: `--requests N` is N ÷ rate seconds of
    arrivals; else Locust's run time less the probe's idle phase; None when unknown."""
    settings = opt.run_settings(environment)
    if settings.requests:
        return settings.requests / rate
    run_time = getattr(getattr(environment, "parsed_options", None), "run_time", None)
    if not isinstance(run_time, int | float) or run_time <= 0:
        return None
    idle = settings.probe_idle_s if settings.probe_rate > 0 else 0.0
    return max(float(run_time) - idle, 1.0)


def _trace_at_rate(spec: Any, rate_rps: float, horizon_s: float | None) -> Any:
    """A trace replay whose speed makes its mean rate `rate_rps` over the part of it
    the run plays (its window, or the run's horizon where that is shorter: a trace's
    first seconds are not its mean); one without arrival times (a ShareGPT file) keeps
    its own pace, as the docs say."""
    from zerohop.workloads.timing.traces import read_trace, speed_for_rate

    spans = [s for s in (spec.duration_s, horizon_s) if s is not None]
    try:
        speed = speed_for_rate(read_trace(spec.trace, spec.resolved_format), rate_rps,
                               start_offset_s=spec.start_offset_s,
                               duration_s=min(spans) if spans else None)
    except ValueError:
        return spec
    return spec.model_copy(update={"speed": speed})


def worker_position(environment: Any) -> tuple[int, int]:
    """(index, count) of this process among the processes that generate load."""
    runner = environment.runner
    index = max(int(getattr(runner, "worker_index", 0) or 0), 0)
    count = int(getattr(environment.parsed_options, opt.WORKER_COUNT, 0) or 0) \
        if getattr(environment, "parsed_options", None) is not None else 0
    return index, max(count, index + 1, 1)


def first_model(host: str) -> str:
    """The target's first base model from /v1/models (what a user would pick by
    default; a LoRA adapter, listed with a `parent`, is not one)."""
    url = host.rstrip("/") + "/v1/models"
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            data = json.loads(resp.read())
        entries = data["data"]
        return str(next((e for e in entries if not e.get("parent")), entries[0])["id"])
    except Exception as exc:
        raise WorkloadError(
            f"no model given and {url} did not list one ({type(exc).__name__}: {exc}); "
            "pass --model"
        ) from exc


def sizing_for(environment: Any, api: str, model: str) -> PromptSizing:
    """How prompts are sized on this target (see prompt_sizing): the target's /tokenize,
    else the local tokenizer `--tokenizer` names, else probe requests of known size and
    their usage counts, else the estimate. Cached per (api, model) in this process."""
    rt = runtime_of(environment)
    cache: dict[tuple[str, str], PromptSizing] = rt.extras.setdefault("sizings", {})
    if (api, model) in cache:
        return cache[(api, model)]
    api_key = api_key_from_env(api)

    def by_usage() -> PromptSizing:
        adapter = create_api_adapter(api)
        client = LLMClient(environment.host, adapter, api_key=api_key,
                           timeouts=Timeouts(ttft_s=120, stall_s=60, total_s=300),
                           anchor=rt.anchor, reactor=rt.reactor())
        try:
            points, failure = probe_points(client, adapter, model, api_key=api_key)
        finally:
            client.close()
        return sizing_from_probes(points, api, failure=failure)

    cache[(api, model)] = choose_sizing(
        lambda: probe_tokenize(environment.host, api, model, api_key=api_key),
        opt.local_tokenizer(environment), by_usage)
    return cache[(api, model)]
