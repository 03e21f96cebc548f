"""The interference probe: a low-rate side stream of small fixed requests beside any
workload (`zerohop run --probe-rate R`, like `vllm bench serve --probe-request-rate`).

It answers "what does the main load do to an unrelated short request?". Arrivals are
Poisson at R req/s, open loop: sent on their schedule whatever the answers or the main
workload's users do. The stream first runs alone for `--probe-idle` seconds (the idle
baseline, measured in the same run on the same target), then the main load starts —
`test_start` holds Locust's spawn until the idle phase is over — and the probe goes on
beside it until the load stops. Its phases (`probe/phases.json`) and records
(`probe/*.jsonl`, workload `probe`) are kept apart from the workloads' records, so
they never enter the main statistics, goodput or SLOs.

One process sends it all: the local runner, or in distributed mode the master (which
sends no load of its own). At a few req/s one greenlet is plenty; its client then shares
no event loop with the main load's users, so a worker's own loop lag under load is not
read as the target's interference; and the idle phase is simply the master waiting
before it tells the workers to spawn.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import gevent
from gevent import GreenletExit
from gevent.pool import Group

from zerohop.client.api_adapters import create_api_adapter
from zerohop.client.api_request import generation_for
from zerohop.client.arms import ArmAssigner
from zerohop.client.http_stream import Timeouts
from zerohop.client.llm_client import LLMClient, RequestSpec, cancelled_record
from zerohop.client.protocols import api_key_from_env
from zerohop.core.layout import PROBE_DIR, PROBE_PHASES_FILE
from zerohop.loadgen import options as opt
from zerohop.loadgen.runtime import runtime_of
from zerohop.storage.run_folder import RecordSink

PROBE_WORKLOAD = "probe"  # the records' workload label
_KEY = "probe"
# common one-token words: the prompt is about `prompt_tokens` tokens on any tokenizer
_WORDS = ("the", "cat", "sat", "on", "a", "mat", "and", "we", "read", "it", "one", "day")


@dataclass
class ProbeStream:
    """One process's probe: its client, its records' sink and its phases."""

    rate_rps: float
    prompt_tokens: int
    output_tokens: int
    idle_s: float
    api: str
    model: str
    client: LLMClient
    sink: RecordSink
    arms: ArmAssigner | None
    rng: random.Random
    phases: dict[str, Any] = field(default_factory=dict)
    stopping: bool = False
    in_flight: Group = field(default_factory=Group)
    sender: Any = None

    def request(self, sequence: int, due_ns: int) -> RequestSpec:
        """The probe's fixed request: a short prompt (unique, so no prefix cache hides
        the prefill), `output_tokens` tokens out, EOS ignored."""
        words = " ".join(_WORDS[i % len(_WORDS)] for i in range(max(self.prompt_tokens - 2, 1)))
        planned = SimpleNamespace(
            workload=PROBE_WORKLOAD, prompt=f"probe {sequence}: {words}", token_ids=None,
            max_tokens=self.output_tokens, temperature=0.0, ignore_eos=True)
        spec = RequestSpec(workload=PROBE_WORKLOAD,
                           generation=generation_for(planned, self.api, self.model),
                           target_input_tokens=self.prompt_tokens, scheduled_perf_ns=due_ns)
        if self.arms is not None:  # direct and through the layer, as the main load
            spec.arm = self.arms.next_arm()
        return spec

    def send(self, spec: RequestSpec) -> None:
        request_id = self.client.new_request_id()
        sent_ns = time.perf_counter_ns()
        try:
            record = self.client.execute(spec, request_id=request_id)
        except GreenletExit:  # cut off at the end of the run: kept as cancelled
            self.sink.add(cancelled_record(spec, request_id, self.client.api_adapter.name,
                                           self.client.anchor, sent_ns).to_row())
            raise
        self.sink.add(record.to_row())


def probe_enabled(environment: Any) -> bool:
    return opt.run_settings(environment).probe_rate > 0


def start_probe(environment: Any) -> None:
    """At test start, in the process that sends the probe: start the stream, run it
    alone for the idle phase (holding the main load's spawn), then note where the load
    begins."""
    rt = runtime_of(environment)
    if not probe_enabled(environment) or rt.role == "worker" or rt.run_dir is None:
        return
    stream = _new_stream(environment)
    rt.extras[_KEY] = stream
    stream.phases["idle_start_ts"] = time.time()
    stream.sender = gevent.spawn(_schedule, stream)
    gevent.sleep(stream.idle_s)
    stream.phases["load_start_ts"] = time.time()
    _write_phases(environment, stream)


def halt_probe(environment: Any) -> None:
    """When the load stops: no new probe request, and the load's end noted."""
    stream: ProbeStream | None = runtime_of(environment).extras.get(_KEY)
    if stream is None or stream.stopping:
        return
    stream.phases["load_end_ts"] = time.time()
    stream.stopping = True
    if stream.sender is not None:
        stream.sender.kill(block=True)


def stop_probe(environment: Any) -> None:
    """At the end of the run: those in flight get the drain timeout, then are cut off
    (recorded as cancelled); the records and the phases are written."""
    halt_probe(environment)
    stream: ProbeStream | None = runtime_of(environment).extras.pop(_KEY, None)
    if stream is None:
        return
    stream.in_flight.join(timeout=opt.locust_options(environment).drain_timeout)
    stream.in_flight.kill(block=True)
    stream.client.close()
    stream.sink.close()
    _write_phases(environment, stream)


def _new_stream(environment: Any) -> ProbeStream:
    from zerohop.loadgen.workload_binding import first_model

    rt = runtime_of(environment)
    settings, own = opt.run_settings(environment), opt.locust_options(environment)
    api = settings.api
    model = settings.model or first_model(environment.host)
    arm_urls = opt.arm_hosts(environment)
    client = LLMClient(
        environment.host, create_api_adapter(api), api_key=api_key_from_env(api),
        timeouts=Timeouts(ttft_s=own.ttft_timeout, stall_s=own.stall_timeout,
                          total_s=own.total_timeout),
        anchor=rt.anchor, reactor=rt.reactor(), arm_urls=arm_urls)
    assert rt.run_dir is not None
    return ProbeStream(
        rate_rps=settings.probe_rate, prompt_tokens=settings.probe_prompt_tokens,
        output_tokens=settings.probe_output_tokens, idle_s=settings.probe_idle_s,
        api=api, model=model, client=client,
        sink=RecordSink(rt.run_dir, PROBE_WORKLOAD, folder=PROBE_DIR),
        arms=ArmAssigner(list(arm_urls), f"{settings.seed}:probe") if arm_urls else None,
        rng=random.Random(f"probe:{settings.seed}"))


def _schedule(stream: ProbeStream) -> None:
    """Poisson arrivals, each sent at its time in its own greenlet (open loop)."""
    due_ns = time.perf_counter_ns()
    sequence = 0
    while not stream.stopping:
        due_ns += int(stream.rng.expovariate(stream.rate_rps) * 1e9)
        wait_s = (due_ns - time.perf_counter_ns()) / 1e9
        if wait_s > 0:
            gevent.sleep(wait_s)
        if stream.stopping:
            return
        stream.in_flight.spawn(stream.send, stream.request(sequence, due_ns))
        sequence += 1


def _write_phases(environment: Any, stream: ProbeStream) -> None:
    rt = runtime_of(environment)
    assert rt.run_dir is not None
    document = {"rate_rps": stream.rate_rps, "prompt_tokens": stream.prompt_tokens,
                "output_tokens": stream.output_tokens, "idle_s": stream.idle_s,
                "api": stream.api, "arms": list(stream.arms.arms) if stream.arms else [],
                **stream.phases}
    path = rt.run_dir / PROBE_DIR / PROBE_PHASES_FILE
    path.write_text(json.dumps(document, indent=2) + "\n")
