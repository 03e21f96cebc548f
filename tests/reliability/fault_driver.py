"""Run the fault matrix the way Locust does: gevent-patched, one greenlet per request,
every request through the Locust users' own path (policy executor, no retries).

Run as a child process (`python -m tests.reliability.fault_driver URL OUT_DIR API
REPEATS`) so that gevent's monkey-patching never touches the pytest process. Prints one
JSON object: the records, the Locust request events fired, and the greenlets' fate.
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import dataclasses  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from types import SimpleNamespace  # noqa: E402
from typing import Any  # noqa: E402

import gevent  # noqa: E402
from locust.env import Environment  # noqa: E402

from tests.reliability.fault_cases import FAULTS  # noqa: E402
from zerohop.client.api_adapters import create_api_adapter  # noqa: E402
from zerohop.client.http_stream import Timeouts  # noqa: E402
from zerohop.client.llm_client import LLMClient, RequestSpec  # noqa: E402
from zerohop.client.protocols import GenerationRequest, HttpRequest  # noqa: E402
from zerohop.core.records import ClockAnchor  # noqa: E402
from zerohop.loadgen.runtime import ProcessRuntime  # noqa: E402
from zerohop.loadgen.users import new_policy_executor, run_logical_request  # noqa: E402
from zerohop.storage.run_folder import RecordSink, consolidate  # noqa: E402
from zerohop.workloads.schema.policy_spec import Policy  # noqa: E402

MODEL = "llama-3-8b"
# short client limits so the stall cases end quickly; the sim's stalls last 2 s
TIMEOUTS = Timeouts(connect_s=2.0, ttft_s=1.0, stall_s=1.0, total_s=10.0)

class FaultAdapter:
    """A real adapter whose requests carry one `x-zerohop-fault` header."""

    def __init__(self, inner: Any, fault: str | None) -> None:
        self._inner = inner
        self._fault = fault
        self.name = inner.name

    def build_request(self, req: GenerationRequest, *, api_key: str | None, request_id: str,
                      stream: bool = True) -> HttpRequest:
        http = self._inner.build_request(req, api_key=api_key, request_id=request_id,
                                         stream=stream)
        if self._fault is None:
            return http
        return dataclasses.replace(http, headers={**http.headers, "x-zerohop-fault": self._fault})

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def main(url: str, closed_url: str, out_dir: Path, api: str, repeats: int) -> None:
    environment = Environment()
    rt = ProcessRuntime(role="local")
    rt.sink = RecordSink(out_dir, "fault-driver")
    environment.zerohop_runtime = rt  # type: ignore[attr-defined]
    events: list[dict[str, Any]] = []
    environment.events.request.add_listener(
        lambda request_type, name, exception=None, **kw: events.append(
            {"type": request_type, "name": name, "failed": exception is not None}))

    anchor = ClockAnchor.now()
    jobs = []
    sent: list[str] = []
    for case, fault in FAULTS.items():
        base = closed_url if fault == "REFUSED" else url
        adapter = FaultAdapter(create_api_adapter(api), None if fault == "REFUSED" else fault)
        for i in range(repeats):
            client = LLMClient(base, adapter, api_key=None, timeouts=TIMEOUTS,  # type: ignore[arg-type]
                               anchor=anchor, id_prefix=f"{api}-{case}-{i}")
            spec = RequestSpec(workload=case, generation=GenerationRequest(
                model=MODEL, max_tokens=8, prompt="hello", ignore_eos=True))
            sent.append(case)
            binding = SimpleNamespace(spec=SimpleNamespace(policy=Policy()))  # no retries
            executor = new_policy_executor(environment, client, binding, seed=i)  # type: ignore[arg-type]
            jobs.append(gevent.spawn(run_logical_request, executor, client, spec))
    gevent.joinall(jobs, timeout=60)
    rt.sink.close()
    consolidate(out_dir)
    rows = [json.loads(line) for line in rt.sink.path.read_text().splitlines()]
    print(json.dumps({
        "sent": sent,
        "records": [{k: r.get(k) for k in ("request_id", "workload", "outcome",
                                           "error_message", "http_status")} for r in rows],
        "events": events,
        "greenlets": [{"dead": g.dead, "exception": repr(g.exception) if g.exception else None}
                      for g in jobs],
        "in_flight": rt.in_flight,
    }))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], Path(sys.argv[3]), sys.argv[4], int(sys.argv[5]))
