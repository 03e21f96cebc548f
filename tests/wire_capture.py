"""Loopback packet capture with kernel timestamps, and the wire's TTFT of each request:
the reference a client's TTFT is judged against (tests/loadgen/test_ttft_vs_wire.py) and
what tests/bench/bench_ttft_vs_vllm_bench.py compares `vllm bench serve` and zerohop with.

An AF_PACKET socket on `lo` with SO_TIMESTAMPNS (CAP_NET_RAW: run as root). The wire's
TTFT of a request is the kernel's timestamp of the first server packet whose payload
completes `"content":"` and one more character (a role-only first chunk has
`"content":""`) minus that of the client's packet that starts `POST `. A TCP connection
carries several requests one after the other, so its packets are split at each new POST.
Requests are matched to exchanges by time: each request takes the first free POST on the
wire at or after its own send stamp.
"""

from __future__ import annotations

import bisect
import ctypes
import re
import socket
import struct
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

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
    tool_sent_ns: np.ndarray  # the tool's send stamp

    @property
    def diff_ms(self) -> np.ndarray:
        return self.tool_ttft_ms - self.wire_ttft_ms


def compare(tool: str, requests: Sequence[ToolRequest], wire: Sequence[Exchange],
            path: str = CHAT_PATH) -> Comparison:
    pairs = [(r, e) for r, e in match(requests, wire, path)
             if r.ttft_ms is not None and e.ttft_ms is not None]
    role = [np.nan if e.role_ns is None else (e.role_ns - e.post_ns) / 1e6 for _, e in pairs]
    return Comparison(
        tool=tool,
        offered=len(requests),
        tool_ttft_ms=np.array([r.ttft_ms for r, _ in pairs], dtype=float),
        wire_ttft_ms=np.array([e.ttft_ms for _, e in pairs], dtype=float),
        wire_role_ms=np.array(role, dtype=float),
        send_lead_ms=np.array([(e.post_ns - r.sent_ns) / 1e6 for r, e in pairs], dtype=float),
        tool_sent_ns=np.array([r.sent_ns for r, _ in pairs], dtype=np.int64),
    )
