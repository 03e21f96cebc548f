"""Benchmark: pricing a layer while the server drifts — sequential runs against one
interleaved run.

The embedded target serves the comparison while background traffic, sent straight to
it, grows by one stream every `--ramp-every-s` seconds (up to `--streams`): a server
whose load drifts upward, as a shared GPU's does. `zerohop run --compare-layer` then
prices the embedded layer (`--per-request-ms 5`) both ways:

* `sequential`: a run direct, then a run through the layer — the layer's run meets the
  heavier server, and the cost it reports is the drift plus the layer;
* `interleaved`: one run, each request drawn direct or layer — both arms meet the
  same drift, and the difference is the layer's.

Printed per mode: the p50 TTFT cost with its 95% interval, the layer's own time
(its `Server-Timing: layer;dur`, p50) for reference, and, for sequential, the runs'
own half-vs-half noise at p50.

    python tests/bench/bench_layer_compare.py --duration 15 --streams 8 --ramp-every-s 3

Run it more than once: these machines are shared and noisy.
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

FLOOD = ("kind: short_query_flood\nname: flood\ninput_tokens: 32\nmax_tokens: 8\n"
         "load: {kind: closed, users: 1}\n")
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota",
         "kappa", "lambda", "mu"]


class Drift:
    """Background streams sent straight to the target, one more every `every_s`."""

    def __init__(self, url: str, model: str, streams: int, every_s: float) -> None:
        self.url, self.model, self.streams, self.every_s = url, model, streams, every_s
        self.stop = threading.Event()
        self.sent = 0
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        starter = threading.Thread(target=self._ramp, daemon=True)
        starter.start()
        self._threads.append(starter)

    def _ramp(self) -> None:
        for i in range(self.streams):
            if self.stop.wait(self.every_s):
                return
            thread = threading.Thread(target=self._stream, args=(i,), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _stream(self, index: int) -> None:
        split = urlsplit(self.url)
        rng = random.Random(index)
        while not self.stop.is_set():
            prompt = " ".join(rng.choice(WORDS) for _ in range(600))  # unique: no cache hits
            body = json.dumps({"model": self.model, "prompt": prompt, "max_tokens": 64,
                               "ignore_eos": True}).encode()
            try:
                conn = http.client.HTTPConnection(split.hostname, split.port, timeout=60)
                conn.request("POST", "/v1/completions", body,
                             {"content-type": "application/json"})
                conn.getresponse().read()
                conn.close()
                self.sent += 1
            except OSError:
                time.sleep(0.1)

    def close(self) -> None:
        self.stop.set()
        for thread in self._threads:
            thread.join(timeout=70)


def first_model(url: str) -> str:
    split = urlsplit(url)
    conn = http.client.HTTPConnection(split.hostname, split.port, timeout=10)
    conn.request("GET", "/v1/models")
    data = json.loads(conn.getresponse().read())
    return str(data["data"][0]["id"])


def layer_p50(results: Path) -> float:
    import pandas as pd

    from zerohop.analysis.server.time_budget import server_timing_ms

    spent = []
    for parquet in results.glob("*/requests.parquet"):
        frame = pd.read_parquet(parquet, columns=["outcome", "server_timing"])
        frame = frame[(frame.outcome == "ok") & frame.server_timing.notna()]
        spent += [server_timing_ms(v, "layer") for v in frame.server_timing]
    values = [v for v in spent if v is not None]
    return float(pd.Series(values).median()) if values else float("nan")


def one(mode: str, args: argparse.Namespace) -> None:
    from zerohop.sim.embedded import start_embedded_target

    with tempfile.TemporaryDirectory(prefix="zh-bench-layer-") as tmp:
        root = Path(tmp)
        (root / "flood.yaml").write_text(FLOOD)
        sim = start_embedded_target([])
        drift = Drift(sim.url, first_model(sim.url), args.streams, args.ramp_every_s)
        try:
            drift.start()
            res = subprocess.run(
                [sys.executable, "-m", "zerohop", "run", "--host", sim.url, "--compare-layer",
                 "--compare-layer-mode", mode, "--layer-args", "--per-request-ms 5",
                 "--workload", str(root / "flood.yaml"), "--only", "ShortQueryFlood",
                 "--duration", f"{args.duration}s", "--results-dir", str(root / "r"),
                 "--seed", str(args.seed), "--no-report", "--telemetry", "none"],
                capture_output=True, text=True, timeout=600)
        finally:
            drift.close()
            sim.stop()
        if res.returncode != 0:
            print(f"{mode}: exit {res.returncode}\n{res.stderr[-1500:]}")
            return
        budget = json.loads(next((root / "r").glob("compare-*.json")).read_text())
        cost = budget["layer_cost_ms"]["ttft_ms"]["p50"]
        low, high = budget["ci95_ms"]["ttft_ms"]["p50"]
        line = (f"{mode:<12} TTFT p50 cost {cost:+7.2f} ms [{low:+.2f}, {high:+.2f}]  "
                f"layer's own p50 {layer_p50(root / 'r'):.2f} ms  "
                f"background requests {drift.sent}")
        if mode == "sequential":
            line += f"  half-vs-half noise p50 {budget['noise_ms']['ttft_ms']['p50']:.2f} ms"
        print(line, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=int, default=15)
    parser.add_argument("--streams", type=int, default=8)
    parser.add_argument("--ramp-every-s", type=float, default=3.0)
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--modes", nargs="+", default=["sequential", "interleaved"])
    args = parser.parse_args()
    for _ in range(args.reps):
        for mode in args.modes:
            one(mode, args)


if __name__ == "__main__":
    main()
