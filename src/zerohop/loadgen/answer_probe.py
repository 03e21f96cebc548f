"""The answer probe (`zerohop run --answer-probe`): does the load change the answers?

A fixed set of plain prompts (`zerohop/data/answer_prompts.txt`) is sent at
temperature 0 with a fixed seed, asking for per-token logprobs, one prompt at a time:
once alone, when Locust has started and before the test starts (before any load, the
interference probe's idle phase and the prompt sizing included, and outside Locust's
`-t`), and once more while the load runs, `SETTLE_S` after it starts. Each answer is
kept whole (text, tokens, token ids where the server names them, logprobs) in
`answers.json`; the comparison is `analysis/comparison/answers.py`. The answers are not records:
they never enter the workloads' figures.

One process sends them (the local runner, or the master in distributed mode), one at a
time, so an answer alone shares the engine with nothing of zerohop's and an answer
under load shares it with the load only. Non-streamed requests on the OpenAI chat or
completions API (the APIs whose answers carry logprobs), straight to `--host` (a layer
comparison's arms are not asked).
"""

from __future__ import annotations

import json
import logging
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import gevent

from zerohop.client.answer_tokens import answer_api_refusal, logprob_fields, read_answer
from zerohop.client.api_adapters import create_api_adapter
from zerohop.client.protocols import GenerationRequest, ProtocolError, api_key_from_env
from zerohop.core.atomic_file import write_text_atomically
from zerohop.core.layout import ANSWERS_FILE
from zerohop.loadgen import options as opt
from zerohop.loadgen.runtime import runtime_of

ANSWER_SEED = 1234  # sent with every prompt: a server that honours it samples the same way
ANSWER_TOKENS = 24  # each answer's length at most
SETTLE_S = 1.0  # after the load starts, before the first answer under load
ANSWERS_SCHEMA = "zerohop.answers"
ALONE, UNDER_LOAD = "alone", "load"
_KEY = "answer_probe"

log = logging.getLogger("zerohop")


def answer_prompts() -> list[str]:
    """The shipped prompts, in order (comment lines and blank lines left out)."""
    text = resources.files("zerohop").joinpath("data/answer_prompts.txt").read_text("utf-8")
    return [line.strip() for line in text.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


@dataclass
class AnswerProbe:
    """One run's answer probe: where it asks, and what it got."""

    base_url: str
    api: str
    model: str
    timeout_s: float
    run_dir: Path
    prompts: list[str] = field(default_factory=answer_prompts)
    answers: list[dict[str, Any]] = field(default_factory=list)
    load_start_ts: float | None = None
    load_end_ts: float | None = None
    sender: Any = None

    def ask(self, index: int, phase: str) -> dict[str, Any]:
        """Send prompt `index` and wait for its whole answer (its record, failed or not)."""
        adapter = create_api_adapter(self.api)
        generation = GenerationRequest(
            model=self.model, max_tokens=ANSWER_TOKENS, prompt=self.prompts[index],
            temperature=0.0,
            extra_body={"seed": ANSWER_SEED, **(logprob_fields(self.api) or {})})
        request = adapter.build_request(generation, api_key=api_key_from_env(self.api),
                                        request_id=f"answer-{uuid.uuid4().hex[:16]}",
                                        stream=False)
        http = urllib.request.Request(self.base_url.rstrip("/") + request.path,
                                      data=request.body, headers=request.headers,
                                      method=request.method)
        record: dict[str, Any] = {"prompt": index, "phase": phase, "sent_ts": time.time()}
        try:
            with urllib.request.urlopen(http, timeout=self.timeout_s) as response:
                answer = read_answer(self.api, response.read())
            record.update(outcome="ok", text=answer.text, finish_reason=answer.finish_reason,
                          tokens=answer.tokens, token_ids=answer.token_ids,
                          logprobs=answer.logprobs)
        except urllib.error.HTTPError as exc:
            record["outcome"] = f"http_{exc.code}"
        except ProtocolError:
            record["outcome"] = "protocol_error"
        except (urllib.error.URLError, OSError) as exc:
            record["outcome"] = "timeout" if isinstance(
                getattr(exc, "reason", exc), TimeoutError) else "connection_error"
        record["end_ts"] = time.time()
        self.answers.append(record)
        return record

    def document(self) -> dict[str, Any]:
        return {"schema": ANSWERS_SCHEMA, "api": self.api, "model": self.model,
                "seed": ANSWER_SEED, "max_tokens": ANSWER_TOKENS, "prompts": self.prompts,
                "load_start_ts": self.load_start_ts, "load_end_ts": self.load_end_ts,
                "answers": self.answers}

    def write(self) -> None:
        text = json.dumps(self.document(), indent=1) + "\n"
        write_text_atomically(self.run_dir / ANSWERS_FILE, text)


def answer_probe_enabled(environment: Any) -> bool:
    return opt.run_settings(environment).answer_probe


def check_answer_probe(environment: Any) -> None:
    """A ValueError (one line) when the probe is asked for on an API it cannot ask."""
    refusal = answer_api_refusal(opt.run_settings(environment).api)
    if answer_probe_enabled(environment) and refusal is not None:
        raise ValueError(refusal)


def answer_alone(environment: Any) -> None:
    """At init, in the process that sends: every prompt once, one at a time, before any
    load (and before Locust's run time starts counting)."""
    from zerohop.loadgen.workload_binding import first_model

    rt = runtime_of(environment)
    if not answer_probe_enabled(environment) or rt.role == "worker" or rt.run_dir is None:
        return
    settings = opt.run_settings(environment)
    try:
        model = settings.model or first_model(environment.host)
    except ValueError as exc:  # no model named and none listed: the run says so itself
        log.warning("zerohop: warning: answer probe left out: %s", exc)
        return
    probe = AnswerProbe(
        base_url=environment.host, api=settings.api, model=model,
        timeout_s=opt.locust_options(environment).total_timeout, run_dir=rt.run_dir)
    rt.extras[_KEY] = probe
    for index in range(len(probe.prompts)):
        probe.ask(index, ALONE)
    probe.write()
    failed = sum(1 for a in probe.answers if a["outcome"] != "ok")
    if failed:
        log.warning("zerohop: warning: answer probe: %d of %d prompts failed alone",
                    failed, len(probe.prompts))


def start_under_load(environment: Any) -> None:
    """At test start: note where the load begins and ask every prompt again beside it."""
    probe: AnswerProbe | None = runtime_of(environment).extras.get(_KEY)
    if probe is None or probe.sender is not None:
        return
    probe.load_start_ts = time.time()
    probe.sender = gevent.spawn(_ask_under_load, probe)


def halt_answers(environment: Any) -> None:
    """When the load stops: note its end, so an answer that finished after it is not
    counted as one under load."""
    probe: AnswerProbe | None = runtime_of(environment).extras.get(_KEY)
    if probe is not None and probe.load_end_ts is None and probe.sender is not None:
        probe.load_end_ts = time.time()


def finish_answers(environment: Any) -> None:
    """At the end of the run: the answer in flight gets the drain timeout, then is cut
    off (not kept); `answers.json` is written."""
    halt_answers(environment)
    probe: AnswerProbe | None = runtime_of(environment).extras.pop(_KEY, None)
    if probe is None:
        return
    if probe.sender is not None:
        probe.sender.join(timeout=opt.locust_options(environment).drain_timeout)
        probe.sender.kill(block=True)
    probe.write()


def _ask_under_load(probe: AnswerProbe) -> None:
    gevent.sleep(SETTLE_S)
    for index in range(len(probe.prompts)):
        if probe.load_end_ts is not None:
            return
        probe.ask(index, UNDER_LOAD)
