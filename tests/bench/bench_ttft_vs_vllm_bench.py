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

The wire's TTFT of a request is the kernel's timestamp of the first server packet whose
payload completes `"content":"` and one more character (vLLM's role-only first chunk
has `"content":""`) minus that of the client's packet that starts `POST `. A TCP
connection carries several requests one after the other (both clients keep connections
alive), so its packets are split at each new POST. Requests are matched to exchanges by
time: each request takes the first free POST on the wire at or after its own send stamp.
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
import bisect
import ctypes
import http.client
import json
import os
import re
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pandas as pd

from zerohop.testing.vllm_cpu import (
    SERVED_MODEL_NAME,
    VllmCpuEnv,
    build_tiny_model,
    default_model_dir,
    probe_env,
    start_vllm,
)

CHAT_PATH = "/v1/chat/completions"
# Linux constants Python's socket module does not name
ETH_P_ALL = 0x0003
ETH_P_IP = 0x0800
SO_ATTACH_FILTER = 26
SO_TIMESTAMPNS = 35
SO_RCVBUFFORCE = 33
SOL_PACKET = 263
PACKET_STATISTICS = 6
PACKET_OUTGOING = 4  # lo shows every packet sent and received: keep the received copy, as tcpdump
TCP_SYN = 0x02
SNAPLEN = 1 << 18  # loopback segments reach 64 KiB; more than enough
CONTENT = re.compile(rb'"content":\s*"[^"]')  # non-empty generated text
ROLE = re.compile(rb'"role":\s*"assistant"')
# a request's POST may reach the wire at most this long after its send stamp
MATCH_WINDOW_NS = 1_000_000_000
MATCH_SLACK_NS = 2_000_000  # clock conversions: tolerate a POST this much before it

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


# --- the capture ----------------------------------------------------------------------
@dataclass(frozen=True)
class Segment:
    """One TCP segment seen on `lo`: kernel receive time (CLOCK_REALTIME ns)."""

    ts_ns: int
    sport: int
    dport: int
    seq: int
    flags: int
    payload: bytes


def port_filter(port: int) -> bytes:
    """Classic BPF for `ip and tcp port PORT` (what `tcpdump -dd` compiles)."""
    code = [
        (0x28, 0, 0, 12), (0x15, 0, 10, ETH_P_IP),  # ethertype IPv4
        (0x30, 0, 0, 23), (0x15, 0, 8, 6),  # protocol TCP
        (0x28, 0, 0, 20), (0x45, 6, 0, 0x1FFF),  # not a later fragment
        (0xB1, 0, 0, 14),  # x = IP header length
        (0x48, 0, 0, 14), (0x15, 2, 0, port),  # source port
        (0x48, 0, 0, 16), (0x15, 0, 1, port),  # destination port
        (0x06, 0, 0, SNAPLEN), (0x06, 0, 0, 0),
    ]  # fmt: skip
    return b"".join(struct.pack("HBBI", *insn) for insn in code)


class LoopbackCapture:
    """Packets to and from one TCP port on `lo`, read by a thread until `stop()`.

    Needs CAP_NET_RAW (root). The kernel stamps each packet when it receives it; the
    reading thread's own delays do not enter the stamps.
    """

    def __init__(self, port: int) -> None:
        self.port = port
        self.frames: list[tuple[int, bytes]] = []
        self.kernel_drops = 0
        # protocol 0 until bind: nothing is queued before the filter is on
        self._sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
        program = ctypes.create_string_buffer(port_filter(port))
        fprog = struct.pack("HP", len(program.raw) // 8, ctypes.addressof(program))
        self._sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)
        self._sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 64 << 20)
        self._sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        # ETH_P_ALL, as tcpdump: a socket bound to ETH_P_IP alone gets its copy after the
        # IP stack has had the packet, and stamps that came out 1-80 µs later than
        # tcpdump's on the same packets (ETH_P_ALL: within 1 µs of them, 12 µs at most)
        self._sock.bind(("lo", ETH_P_ALL))
        self._sock.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, name="capture", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        ancillary = socket.CMSG_SPACE(16)
        while True:
            try:
                data, anc, _flags, address = self._sock.recvmsg(SNAPLEN, ancillary)
            except TimeoutError:
                if self._stop.is_set():
                    return  # the queue is drained
                continue
            if address[2] == PACKET_OUTGOING:
                continue
            for level, kind, value in anc:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                    seconds, nanos = struct.unpack("qq", value[:16])
                    self.frames.append((seconds * 1_000_000_000 + nanos, data))

    def stop(self) -> list[Segment]:
        self._stop.set()
        self._thread.join()
        stats = self._sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8)
        self.kernel_drops = struct.unpack("II", stats)[1]
        self._sock.close()
        return [s for s in (parse_frame(ts, f) for ts, f in self.frames) if s is not None]


def parse_frame(ts_ns: int, frame: bytes) -> Segment | None:
    """An Ethernet/IPv4/TCP frame as `lo` delivers it; None for anything else."""
    if len(frame) < 54 or frame[12:14] != b"\x08\x00" or frame[23] != 6:
        return None
    ip = frame[14:]
    header = (ip[0] & 0x0F) * 4
    total = int.from_bytes(ip[2:4], "big") or len(ip)  # 0: a segmentation-offload frame
    tcp = ip[header:total]
    sport, dport, seq = struct.unpack_from("!HHI", tcp)
    offset = (tcp[12] >> 4) * 4
    return Segment(ts_ns, sport, dport, seq, tcp[13], bytes(tcp[offset:]))


# --- exchanges on the wire --------------------------------------------------------------
@dataclass
class Exchange:
    """One request/response on one connection, as the wire saw it (ns, CLOCK_REALTIME)."""

    client_port: int
    path: str
    post_ns: int
    role_ns: int | None = None
    content_ns: int | None = None
    reply: list[tuple[int, bytes]] = field(default_factory=list, repr=False)

    @property
    def ttft_ms(self) -> float | None:
        return None if self.content_ns is None else (self.content_ns - self.post_ns) / 1e6

    def locate(self) -> None:
        """Set role_ns and content_ns: the packets that complete each pattern."""
        body = b"".join(p for _, p in self.reply)
        ends = list(np.cumsum([len(p) for _, p in self.reply]))
        for pattern, name in ((ROLE, "role_ns"), (CONTENT, "content_ns")):
            found = pattern.search(body)
            if found is not None:
                packet = bisect.bisect_left(ends, found.end())
                setattr(self, name, self.reply[packet][0])


def exchanges(segments: Iterable[Segment], port: int) -> list[Exchange]:
    """Split each connection's packets at every client packet that starts `POST `."""
    done: list[Exchange] = []
    open_: dict[int, Exchange] = {}
    seen: set[tuple[int, int, int, int]] = set()
    for seg in sorted(segments, key=lambda s: s.ts_ns):
        from_client = seg.dport == port
        client = seg.sport if from_client else seg.dport
        if from_client and seg.flags & TCP_SYN and client in open_:
            done.append(open_.pop(client))  # the port was reused by a new connection
        key = (client, int(from_client), seg.seq, len(seg.payload))
        if not seg.payload or key in seen:  # no data, or a retransmission
            continue
        seen.add(key)
        if from_client:
            if seg.payload.startswith(b"POST "):
                if client in open_:
                    done.append(open_.pop(client))
                path = seg.payload.split(b" ", 2)[1].decode("ascii", "replace")
                open_[client] = Exchange(client, path, seg.ts_ns)
        elif client in open_:
            open_[client].reply.append((seg.ts_ns, seg.payload))
    done.extend(open_.values())
    for exchange in done:
        exchange.locate()
    return sorted(done, key=lambda e: e.post_ns)


# --- the tools' requests -----------------------------------------------------------------
@dataclass(frozen=True)
class ToolRequest:
    """One request as a tool recorded it: its send stamp (CLOCK_REALTIME ns), its TTFT."""

    sent_ns: int
    ttft_ms: float | None  # None: the tool did not count it as a success


def realtime_minus_monotonic_ns() -> int:
    """CLOCK_REALTIME − CLOCK_MONOTONIC (perf_counter on Linux), from the tightest of a
    few bracketed readings."""
    best: tuple[int, int] | None = None
    for _ in range(20):
        before = time.perf_counter_ns()
        wall = time.time_ns()
        after = time.perf_counter_ns()
        if best is None or after - before < best[0]:
            best = (after - before, wall - (before + after) // 2)
    assert best is not None
    return best[1]


def vllm_bench_requests(result: Path, offset_ns: int) -> list[ToolRequest]:
    """Per request of a `--save-detailed` result: start (perf_counter s) and TTFT (s)."""
    data = json.loads(result.read_text())
    return [
        ToolRequest(round(start * 1e9) + offset_ns,
                    ttft * 1e3 if not error and ttft and ttft > 0 else None)
        for start, ttft, error in zip(data["start_times"], data["ttfts"], data["errors"],
                                      strict=True)
    ]  # fmt: skip


def zerohop_requests(requests: Path) -> list[ToolRequest]:
    frame = pd.read_parquet(requests, columns=["sent_ts", "ttft_ms", "outcome"])
    return [
        ToolRequest(round(sent * 1e9),
                    float(ttft) if outcome == "ok" and pd.notna(ttft) else None)
        for sent, ttft, outcome in frame.itertuples(index=False)
        if pd.notna(sent)
    ]  # fmt: skip


def match(requests: Sequence[ToolRequest], wire: Sequence[Exchange],
          path: str = CHAT_PATH) -> list[tuple[ToolRequest, Exchange]]:
    """Each request, in send order, takes the first free exchange on `path` whose POST
    is at or after its send stamp (within the window); requests without one are left."""
    candidates = [e for e in wire if e.path == path]
    starts = [e.post_ns for e in candidates]
    used = [False] * len(candidates)
    pairs = []
    for request in sorted(requests, key=lambda r: r.sent_ns):
        at = bisect.bisect_left(starts, request.sent_ns - MATCH_SLACK_NS)
        while at < len(candidates) and used[at]:
            at += 1
        if at < len(candidates) and starts[at] <= request.sent_ns + MATCH_WINDOW_NS:
            used[at] = True
            pairs.append((request, candidates[at]))
    return pairs


# --- the figures ---------------------------------------------------------------------
@dataclass(frozen=True)
class Comparison:
    tool: str
    offered: int  # requests the tool recorded
    tool_ttft_ms: np.ndarray  # over the requests both the tool and the wire timed
    wire_ttft_ms: np.ndarray
    wire_role_ms: np.ndarray  # POST → role-only chunk's packet (NaN: none seen)
    send_lead_ms: np.ndarray  # tool's send stamp → its POST packet

    @property
    def diff_ms(self) -> np.ndarray:
        return self.tool_ttft_ms - self.wire_ttft_ms


def compare(tool: str, requests: Sequence[ToolRequest], wire: Sequence[Exchange]) -> Comparison:
    pairs = [(r, e) for r, e in match(requests, wire)
             if r.ttft_ms is not None and e.ttft_ms is not None]
    role = [np.nan if e.role_ns is None else (e.role_ns - e.post_ns) / 1e6 for _, e in pairs]
    return Comparison(
        tool=tool,
        offered=len(requests),
        tool_ttft_ms=np.array([r.ttft_ms for r, _ in pairs], dtype=float),
        wire_ttft_ms=np.array([e.ttft_ms for _, e in pairs], dtype=float),
        wire_role_ms=np.array(role, dtype=float),
        send_lead_ms=np.array([(e.post_ns - r.sent_ns) / 1e6 for r, e in pairs], dtype=float),
    )


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
