"""Benchmark: where a short streamed request's client CPU goes, stage by stage.

Each stage of the open-loop path runs `--requests` times in a loop in this one process
(no gevent, no Locust), timed with the process's CPU time, against the canned-stream
server (canned_stream_server.py, pinned to the last core) on one kept connection:

* plan: the workload's planner hands out the next request (sizes, prompt text);
* spec: the planned request as the API's request spec;
* encode: the adapter builds the HTTP request (JSON body, headers);
* exchange: send it and read the whole 2-token stream (kernel stamps; blocking reads
  here, where under Locust one reactor reads every stream: the system calls are the same);
* decode + record: the stream decoded (`StreamDecode`) into a RequestRecord;
* keep: the record as a row into the run's JSONL sink (flushes included);
* exact prompt: the word-count chooser that sizes prompts exactly against a target with
  /tokenize (not used against the canned server, which has none), for 40 tokens.

The sum is the client's own work per request; bench_open_loop_sender.py's CPU per
request minus it is what gevent and Locust add (greenlets, the hub, stats events).

    python tests/bench/bench_sender_stages.py --requests 20000
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import canned_stream_server
import numpy as np

from zerohop.client.api_adapters import create_api_adapter
from zerohop.client.api_request import to_request_spec
from zerohop.client.http_stream import Timeouts, stream_request
from zerohop.client.measure import StreamDecode, build_record
from zerohop.core.records import ClockAnchor, RequestRecord
from zerohop.storage.run_folder import RecordSink
from zerohop.workloads.content.word_counts import WordCounts
from zerohop.workloads.inputs import load_workloads
from zerohop.workloads.kind_planner import make_workload_planner
from zerohop.workloads.planners.worker_load import worker_setup

WORKLOAD = """\
kind: short_query_flood
name: stages
input_tokens: 16
max_tokens: 2
ignore_eos: true
load: {kind: open, rate_rps: 1000, arrival: poisson}
"""


def per_call_us(fn: Callable[[], Any], n: int) -> float:
    t0 = time.process_time()
    for _ in range(n):
        fn()
    return (time.process_time() - t0) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20000)
    args = parser.parse_args()
    n = args.requests
    ncpu = os.cpu_count() or 1
    if ncpu > 1:
        os.sched_setaffinity(0, {0})
    server, url = canned_stream_server.start(ncpu - 1 if ncpu > 1 else None)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "w.yaml"
            path.write_text(WORKLOAD)
            spec = load_workloads([path])[0]
            planner = make_workload_planner(spec, worker_setup(spec, seed=1, worker_index=0,
                                                              worker_count=1))
            schedule = planner.schedule()
            adapter = create_api_adapter("openai-chat")
            planned = [next(schedule) for _ in range(n)]
            specs = [to_request_spec(p, "openai-chat", "canned") for p in planned]
            rows: list[float] = []
            schedule = planner.schedule()
            rows.append(per_call_us(lambda: next(schedule), n))
            it = iter(planned)
            rows.append(per_call_us(lambda: to_request_spec(next(it), "openai-chat", "canned"),
                                    n))
            it_specs = iter(specs)
            requests = []
            rows.append(per_call_us(lambda: requests.append(adapter.build_request(
                next(it_specs).generation, api_key=None, request_id="r", stream=True)), n))
            timeouts, kept, exchanges = Timeouts(), [None], []

            def exchange() -> None:
                ex, kept[0] = stream_request(url, requests[len(exchanges)], timeouts,
                                             sock=kept[0])
                exchanges.append(ex)

            rows.append(per_call_us(exchange, n))
            assert all(ex.end == "complete" for ex in exchanges), "the canned stream failed"
            anchor, records = ClockAnchor.now(), []
            it_ex = iter(exchanges)

            def decode() -> None:
                record = RequestRecord(request_id="r", workload="stages", api=adapter.name,
                                       model="canned")
                build_record(record, next(it_ex), adapter, anchor,
                             scan=StreamDecode(adapter))
                records.append(record)

            rows.append(per_call_us(decode, n))
            assert all(r.outcome == "ok" for r in records), "a record is not ok"
            sink, it_rec = RecordSink(Path(tmp), "stages"), iter(records)
            rows.append(per_call_us(lambda: sink.add(next(it_rec).to_row()), n))
            sink.close()
            rng = np.random.default_rng(1)
            spaced = rng.integers(1, 4, size=4096)
            words = WordCounts(spaced=spaced, spaced_stop=spaced + 1,
                               opening={i: 9 for i in range(0, 160, 10)}, stop_every=12)
            exact = per_call_us(lambda: words.choose(40, rng), n)
    finally:
        server.kill()
    names = ["plan", "spec", "encode", "exchange", "decode + record", "keep"]
    for name, us in zip(names, rows, strict=True):
        print(f"{name:16s} {us:7.1f} µs")
    print(f"{'sum':16s} {sum(rows):7.1f} µs per request (the client's own work)")
    print(f"{'exact prompt':16s} {exact:7.1f} µs (40 tokens; only against a /tokenize target)")


if __name__ == "__main__":
    main()
