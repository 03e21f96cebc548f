"""A live one-line progress display for `zerohop run`, read from the record sinks.

It follows the JSONL files the run is writing (never Locust's internals), so what it
shows is what the results folder will hold."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from zerohop.core.layout import RECORDS_DIR

REFRESH_S = 1.0


def follow_progress(proc: subprocess.Popen[bytes], run_dir: Path, duration_s: float) -> None:
    """Print progress until `proc` exits; a terminal gets one rewritten line, a log one
    line every ten seconds."""
    tty = sys.stdout.isatty()
    offsets: dict[Path, int] = {}
    counts = {"requests": 0, "errors": 0}
    ttfts: list[float] = []
    start = time.monotonic()
    last_print = 0.0
    while proc.poll() is None:
        time.sleep(REFRESH_S)
        _read_new(run_dir, offsets, counts, ttfts)
        elapsed = time.monotonic() - start
        if tty or elapsed - last_print >= 10:
            last_print = elapsed
            line = _line(elapsed, duration_s, counts, ttfts)
            print(("\r" + line) if tty else line, end="" if tty else "\n", flush=True)
    _read_new(run_dir, offsets, counts, ttfts)
    if tty:
        print("\r" + _line(time.monotonic() - start, duration_s, counts, ttfts), flush=True)


def _read_new(run_dir: Path, offsets: dict[Path, int], counts: dict[str, int],
              ttfts: list[float]) -> None:
    for path in (run_dir / RECORDS_DIR).glob("*.jsonl"):
        with open(path, "rb") as fh:
            fh.seek(offsets.get(path, 0))
            data = fh.read()
        end = data.rfind(b"\n") + 1  # only whole lines
        offsets[path] = offsets.get(path, 0) + end
        for line in data[:end].splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            counts["requests"] += 1
            if row.get("outcome") != "ok":
                counts["errors"] += 1
            elif row.get("ttft_ms") is not None:
                ttfts.append(float(row["ttft_ms"]))
    if len(ttfts) > 20000:
        del ttfts[: len(ttfts) - 20000]


def _line(elapsed: float, duration: float, counts: dict[str, int], ttfts: list[float]) -> str:
    p50 = sorted(ttfts)[len(ttfts) // 2] if ttfts else float("nan")
    rate = counts["requests"] / elapsed if elapsed > 0 else 0.0
    return (f"[{elapsed:5.0f}/{duration:.0f} s] requests {counts['requests']:>7} "
            f"({rate:6.1f}/s)  errors {counts['errors']:>5}  TTFT p50 {p50:8.1f} ms")
