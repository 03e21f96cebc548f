"""TTFT of `vllm bench serve` and of zerohop against the wire, on a real vLLM CPU server.

Starts vLLM with the tiny model of the vllm tier (tools/vllm_cpu/setup_env.sh must have
run) on the last CPU, puts everything else on the others, and captures the loopback
traffic to it with kernel timestamps (an AF_PACKET socket on `lo` with SO_TIMESTAMPNS;
run as root). Then, on /v1/chat/completions with streaming, one after the other:

- `vllm bench serve` (random dataset, the model folder's tokenizer, `--save-result
  --save-detailed` for its per-request TTFTs; run as `vllm bench serve` runs it, its
  console script aside, which fails on the package's vllm-cpu name);
- `zerohop run --api openai-chat` with a short-query flood of the same shape (128-token
  prompts, `--output-tokens` answers with ignore_eos, Poisson arrivals at `--rate`).

The wire's TTFT of a request and how requests are matched to the wire are those of
tests/wire_capture.py (which the collected test tests/loadgen/test_ttft_vs_wire.py
shares): the first server packet that completes non-empty `"content"` (vLLM's role-only
first chunk has `"content":""`) minus the client's `POST ` packet.
docs/ttft-vs-vllm-bench.md explains why the two tools differ.

Another vLLM may share the machine: run this under the shared lock, one vLLM at a time,

    flock /tmp/zerohop-vllm.lock python tests/bench/bench_ttft_vs_vllm_bench.py

It prints, per tool and for the wire over the same requests: requests, mean and median
TTFT, mean and median of (tool − wire), p99 of |tool − wire| (ms); then the wire's gap
from the role-only chunk's packet to the first content packet, `vllm bench serve`
against the role-only packet, and each client's lead from its send stamp to its POST.
`--check-capture` checks the capture and the matching against a plain local HTTP server
that streams a role-only chunk, 15 ms, then content (no vLLM needed). Run it more than
once: these machines are shared and noisy.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # the capture it shares with tests/loadgen/test_ttft_vs_wire.py

from tests.vllm_cpu import (  # noqa: E402
    SERVED_MODEL_NAME,
    VllmCpuEnv,
    build_tiny_model,
    default_model_dir,
    probe_env,
    start_vllm,
)
from tests.wire_capture import (  # noqa: E402
    CHAT_PATH,
    CONTENT,
    Comparison,
    Exchange,
    LoopbackCapture,
    ToolRequest,
    compare,
    exchanges,
    match,
    realtime_minus_monotonic_ns,
    zerohop_requests,
)

# `vllm bench serve`, as vllm.entrypoints.cli.benchmark.serve wires it
VLLM_BENCH_MAIN = (
    "import sys\n"
    "from vllm.benchmarks.serve import add_cli_args, main\n"
    "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
    "parser = FlexibleArgumentParser(prog='vllm bench serve')\n"
    "add_cli_args(parser)\n"
    "main(parser.parse_args(sys.argv[1:]))\n"
)

INPUT_TOKENS = 128  # both tools' prompts
ZEROHOP_WORKLOAD = """\
kind: short_query_flood
name: flood
input_tokens: {input_tokens}
max_tokens: {max_tokens}
ignore_eos: true
temperature: 0.0
load: {{kind: open, rate_rps: {rate}, arrival: poisson, max_in_flight: 64}}
"""


# --- the tools' requests ---
def vllm_bench_requests(result: Path, offset_ns: int) -> list[ToolRequest]:
    """Per request of a `--save-detailed` result: start (perf_counter s) and TTFT (s)."""
    data = json.loads(result.read_text())
    return [
        ToolRequest(round(start * 1e9) + offset_ns,
                    ttft * 1e3 if not error and ttft and ttft > 0 else None)
        for start, ttft, error in zip(data["start_times"], data["ttfts"], data["errors"],
                                      strict=True)
    ]  # fmt: skip


def write_pairs(path: Path, requests: Sequence[ToolRequest], wire: Sequence[Exchange]) -> None:
    """Every matched request with its exchange's packet times, for a second look."""
    pd.DataFrame([
        {"sent_ns": r.sent_ns, "tool_ttft_ms": r.ttft_ms, "client_port": e.client_port,
         "post_ns": e.post_ns, "role_ns": e.role_ns, "content_ns": e.content_ns,
         "wire_ttft_ms": e.ttft_ms}
        for r, e in match(requests, wire)
    ]).to_csv(path, index=False)


def render(comparisons: Sequence[Comparison]) -> str:
    def stats(values: np.ndarray) -> str:
        if not len(values) or np.isnan(values).all():
            return f"{'-':>8} {'-':>8}"
        return f"{np.nanmean(values):8.2f} {np.nanmedian(values):8.2f}"

    lines = [
        f"{'':22} {'requests':>8} {'TTFT ms':>17} {'tool − wire ms':>17} {'p99 |d|':>8}",
        f"{'':22} {'':>8} {'mean':>8} {'median':>8} {'mean':>8} {'median':>8} {'ms':>8}",
    ]
    for c in comparisons:
        n = f"{len(c.diff_ms)}/{c.offered}"
        p99 = f"{np.percentile(np.abs(c.diff_ms), 99):8.2f}" if len(c.diff_ms) else "-"
        lines.append(f"{c.tool:22} {n:>8} {stats(c.tool_ttft_ms)} {stats(c.diff_ms)} {p99:>8}")
        lines.append(f"{'  wire, same requests':22} {'':>8} {stats(c.wire_ttft_ms)}")
    lines.append("")
    lines.append("mean and median, ms:")
    for c in comparisons:
        lines.append(f"{c.tool}: wire role-only packet → first content packet "
                     f"{stats(c.wire_ttft_ms - c.wire_role_ms)}; tool − wire role-only packet "
                     f"{stats(c.tool_ttft_ms - c.wire_role_ms)}; send stamp → POST packet "
                     f"{stats(c.send_lead_ms)}")
    return "\n".join(lines)


# --- the runs ----------------------------------------------------------------------------
def vllm_environment() -> dict[str, str]:
    """The caller's environment without its venv, offline, as vllm_cpu starts vLLM."""
    environment = {k: v for k, v in os.environ.items()
                   if k not in {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"}}
    environment.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                        "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"})
    return environment


def run_vllm_bench(env: VllmCpuEnv, url: str, model_dir: Path, out: Path, prompts: int,
                   rate: float, output_tokens: int) -> Path:
    command = [
        str(env.python), "-c", VLLM_BENCH_MAIN,
        "--backend", "openai-chat", "--base-url", url, "--endpoint", CHAT_PATH,
        "--model", SERVED_MODEL_NAME, "--tokenizer", str(model_dir),
        "--dataset-name", "random", "--random-input-len", str(INPUT_TOKENS),
        "--random-output-len", str(output_tokens), "--ignore-eos", "--temperature", "0",
        "--num-prompts", str(prompts), "--request-rate", str(rate), "--seed", "1234",
        "--disable-tqdm", "--save-result", "--save-detailed",
        "--result-dir", str(out), "--result-filename", "vllm-bench.json",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=600,
                          env=vllm_environment(), check=False)
    (out / "vllm-bench.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        tail = (done.stdout + done.stderr)[-1500:]
        sys.exit(f"vllm bench serve exited {done.returncode}: {tail}")
    return out / "vllm-bench.json"


def run_zerohop(url: str, out: Path, requests: int, rate: float, output_tokens: int) -> Path:
    workload = out / "flood.yaml"
    workload.write_text(ZEROHOP_WORKLOAD.format(input_tokens=INPUT_TOKENS,
                                                max_tokens=output_tokens, rate=rate))
    results = out / "zerohop"
    command = [
        sys.executable, "-m", "zerohop", "run", "--host", url, "--model", SERVED_MODEL_NAME,
        "--api", "openai-chat", "--workload", str(workload),
        "--duration", f"{max(1, round(requests / rate))}s", "--telemetry", "none",
        "--microbench", "off", "--results-dir", str(results), "--no-report",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    (out / "zerohop.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        sys.exit(f"zerohop run exited {done.returncode}: {done.stderr[-1500:]}")
    return next(p for p in results.iterdir() if p.is_dir()) / "requests.parquet"


def measure(args: argparse.Namespace, out: Path) -> list[Comparison]:
    probe = probe_env(setup=False)
    if probe.env is None:
        sys.exit(f"vLLM CPU env not found at {probe.venv}: run tools/vllm_cpu/setup_env.sh")
    model_dir = build_tiny_model(probe.env, default_model_dir())
    cpus = sorted(os.sched_getaffinity(0))
    server_cpus = cpus[-1:] if len(cpus) >= 2 else None
    with start_vllm(probe.env, model_dir, cpus=server_cpus,
                    log_path=out / "vllm-server.log") as server:
        print(f"vLLM up in {server.startup_s:.0f} s at {server.url}, CPUs {server_cpus}; "
              f"load on {cpus[:-1] if server_cpus else cpus}; per tool {args.requests} "
              f"requests at {args.rate:g}/s, {INPUT_TOKENS} tokens in, "
              f"{args.output_tokens} out", flush=True)
        if server_cpus:
            os.sched_setaffinity(0, cpus[:-1])  # inherited by the tools started here
        offset_before = realtime_minus_monotonic_ns()
        capture = LoopbackCapture(server.port)
        try:
            bench_json = run_vllm_bench(probe.env, server.url, model_dir, out, args.requests,
                                        args.rate, args.output_tokens)
            offset_after = realtime_minus_monotonic_ns()
            parquet = run_zerohop(server.url, out, args.requests, args.rate,
                                  args.output_tokens)
            time.sleep(0.5)
        finally:
            segments = capture.stop()
            os.sched_setaffinity(0, cpus)
    wire = exchanges(segments, server.port)
    print(f"capture: {len(segments)} TCP segments, {capture.kernel_drops} dropped by the "
          f"kernel, {sum(e.path == CHAT_PATH for e in wire)} chat exchanges; "
          f"realtime − monotonic moved {(offset_after - offset_before) / 1e3:+.1f} µs "
          f"during vllm bench", flush=True)
    offset = (offset_before + offset_after) // 2
    tools = {"vllm bench serve": vllm_bench_requests(bench_json, offset),
             "zerohop": zerohop_requests(parquet)}
    for tool, requests in tools.items():
        write_pairs(out / f"pairs-{tool.split()[0]}.csv", requests, wire)
    return [compare(tool, requests, wire) for tool, requests in tools.items()]


# --- the capture check, without vLLM ----------------------------------------------------
ROLE_CHUNK = b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n'
TEXT_CHUNK = b'data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n'
CHECK_GAP_S = 0.015


class _SseHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()  # as uvicorn does: without it Nagle holds the role-only chunk
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        for chunk, pause in ((ROLE_CHUNK, CHECK_GAP_S), (TEXT_CHUNK, 0.005),
                             (TEXT_CHUNK, 0.0), (b"data: [DONE]\n\n", 0.0)):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.flush()
            time.sleep(pause)
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def log_message(self, format: str, *args: object) -> None:
        pass


def check_capture(requests: int) -> list[Comparison]:
    """A keep-alive client stamps its send and its first content line; the wire is the
    reference as with vLLM. Expect tool − wire ≈ +0.1 ms and a ~15 ms role→content gap."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SseHandler)
    port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    capture = LoopbackCapture(port)
    recorded = []
    try:
        for connection in range(2):  # two connections, several requests on each
            conn = http.client.HTTPConnection("127.0.0.1", port)
            for _ in range(requests // 2 + connection):
                sent = time.time_ns()
                conn.request("POST", CHAT_PATH, body=b'{"stream":true}',
                             headers={"Content-Type": "application/json"})
                response = conn.getresponse()
                first = None
                for line in response:
                    if first is None and CONTENT.search(line):
                        first = time.time_ns()
                recorded.append(ToolRequest(sent, None if first is None
                                            else (first - sent) / 1e6))
                time.sleep(0.01)
            conn.close()
        time.sleep(0.3)
    finally:
        segments = capture.stop()
        server.shutdown()
    wire = exchanges(segments, port)
    print(f"capture: {len(segments)} TCP segments, {capture.kernel_drops} dropped, "
          f"{len(wire)} exchanges on {len({e.client_port for e in wire})} connections")
    return [compare("check client", recorded, wire)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=60, help="per tool")
    parser.add_argument("--rate", type=float, default=3.0, help="req/s, Poisson, per tool")
    parser.add_argument("--output-tokens", type=int, default=32)
    parser.add_argument("--keep", type=Path, help="keep logs, results and each tool's "
                        "matched packet times (pairs-*.csv) in this folder")
    parser.add_argument("--check-capture", action="store_true",
                        help="check the capture on a local HTTP server; no vLLM")
    args = parser.parse_args()
    if args.check_capture:
        print(render(check_capture(args.requests)))
        return
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        comparisons = measure(args, args.keep)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            comparisons = measure(args, Path(tmp))
    print(render(comparisons))


if __name__ == "__main__":
    main()
