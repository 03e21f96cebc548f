"""A live one-line progress display for `zerohop run`, read from the record sinks.

It follows the JSONL files the run is writing (never Locust's internals), so what it
shows is what the results folder will hold. It runs beside the load generator, often on
its core, so it must cost next to nothing: lines and outcomes are counted by scanning
the bytes, and only the newest lines of each read are parsed for TTFT. Parsing every
row cost 6.6 % of the client's core at 3,000 req/s and put a burst of schedule lag
of up to 20 ms into every second (tests/bench/bench_open_loop_sender.py). The p50 of
that sample is the report's percentile (`analysis.quantiles.describe`: linear
interpolation, the mean of the two middle values of an even count). Beside it, the live
saturation verdict (`saturation_watch`); with `--stop-when-saturated` it ends the load
(SIGTERM: Locust drains and finishes the folder) the first time it says saturated."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from zerohop.analysis.quantiles import describe
from zerohop.core.layout import RECORDS_DIR
from zerohop.runner.saturation_watch import SaturationWatch

REFRESH_S = 1.0
TTFT_SAMPLE_LINES = 200  # per file and refresh: enough for a p50, cheap at any rate
_OK = b'"outcome":"ok"'  # the sinks write compact JSON (core.json_codec)


def follow_progress(proc: subprocess.Popen[bytes], run_dir: Path, duration_s: float,
                    request_count: int | None = None, *, stop_when_saturated: bool = False
                    ) -> dict[str, Any] | None:
    """Print progress until `proc` exits; a terminal gets one rewritten line, a log one
    line every ten seconds. `request_count`: a --requests run, whose count ends it (its
    duration is only a cap). Returns the live verdict the load was stopped on (with
    `stopped_at_s` and `planned_s`), or None."""
    tty = sys.stdout.isatty()
    watch = SaturationWatch(run_dir)
    stopped: dict[str, Any] | None = None
    offsets: dict[Path, int] = {}
    counts = {"requests": 0, "errors": 0}
    ttfts: list[float] = []
    start = time.monotonic()
    last_print = 0.0
    while proc.poll() is None:
        time.sleep(REFRESH_S)
        _read_new(run_dir, offsets, counts, ttfts)
        verdict = watch.poll()
        if stop_when_saturated and verdict.saturated and stopped is None:
            stopped = {**verdict.as_dict(), "stopped_at_s": round(watch.elapsed_s, 3),
                       "planned_s": duration_s}
            proc.send_signal(signal.SIGTERM)
        elapsed = time.monotonic() - start
        if tty or elapsed - last_print >= 10:
            last_print = elapsed
            line = _line(elapsed, duration_s, counts, ttfts, request_count) + watch.status()
            print(("\r" + line) if tty else line, end="" if tty else "\n", flush=True)
    _read_new(run_dir, offsets, counts, ttfts)
    if tty:
        print("\r" + _line(time.monotonic() - start, duration_s, counts, ttfts, request_count)
              + watch.status(), flush=True)
    return stopped


def _read_new(run_dir: Path, offsets: dict[Path, int], counts: dict[str, int],
              ttfts: list[float]) -> None:
    for path in (run_dir / RECORDS_DIR).glob("*.jsonl"):
        with open(path, "rb") as fh:
            fh.seek(offsets.get(path, 0))
            data = fh.read()
        end = data.rfind(b"\n") + 1  # only whole lines
        offsets[path] = offsets.get(path, 0) + end
        whole = data[:end]
        lines, ok = whole.count(b"\n"), whole.count(_OK)
        counts["requests"] += lines
        counts["errors"] += lines - ok
        # the newest lines only, the rest left unsplit (the last part is the empty b"")
        newest = whole.rsplit(b"\n", TTFT_SAMPLE_LINES + 1)[-TTFT_SAMPLE_LINES - 1 : -1]
        ttfts.extend(_ttfts(newest))
    if len(ttfts) > 20000:
        del ttfts[: len(ttfts) - 20000]


def _ttfts(lines: list[bytes]) -> list[float]:
    out = []
    for line in lines:
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if row.get("outcome") == "ok" and isinstance(row.get("ttft_ms"), int | float):
            out.append(float(row["ttft_ms"]))
    return out


def _line(elapsed: float, duration: float, counts: dict[str, int], ttfts: list[float],
          request_count: int | None = None) -> str:
    p50 = describe(np.asarray(ttfts, dtype=float)).get("p50")  # NaN while there is none
    ttft = f"{p50:8.1f} ms" if np.isfinite(p50) else f"{'-':>8}   "  # none: pooling kinds
    rate = counts["requests"] / elapsed if elapsed > 0 else 0.0
    clock = f"{elapsed:5.0f} s" if request_count else f"{elapsed:5.0f}/{duration:.0f} s"
    done = f"/{request_count}" if request_count else ""
    return (f"[{clock}] requests {counts['requests']:>7}{done} "
            f"({rate:6.1f}/s)  errors {counts['errors']:>5}  TTFT p50 {ttft}")
