"""Client fidelity against ground truth: how late does zerohop's Locust client see what
the embedded target really sent?

For each concurrency, a real Locust run (closed loop, one process = one core) streams
from the embedded target, which logs when it handed every first and last token to the
socket. Client error = client timestamp of the read that delivered the first content
event − server timestamp of its write (same machine, same wall clock). Also printed: the
server's own emission lag over the same run, so a busy server is not mistaken for client
error, and the content events per second the client sustained.

    python tests/bench/bench_client_fidelity.py                 # 50, 100, 200, 400 streams
    python tests/bench/bench_client_fidelity.py --streams 200 --telemetry "prom,loadgen"
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO))  # the workload it shares with tests/loadgen

from tests.loadgen.fidelity_workload import fidelity_workload  # noqa: E402

from zerohop.analysis.client.fidelity_check import joined_requests  # noqa: E402
from zerohop.sim.embedded import start_embedded_target  # noqa: E402
from zerohop.storage.selfcheck_files import read_ground_truth  # noqa: E402


def run_point(streams: int, tokens: int, duration_s: int, time_scale: float, telemetry: str,
              workdir: Path, cores: tuple[int, int] | None = None) -> dict[str, float]:
    workdir = Path(tempfile.mkdtemp(prefix=f"s{streams}-", dir=workdir))  # repeats allowed
    gt = workdir / "gt.jsonl"
    wl = workdir / "wl.yaml"
    wl.write_text(fidelity_workload(tokens, streams))
    results = workdir / "results"
    with start_embedded_target(["--time-scale", str(time_scale), "--max-num-seqs", "1024"],
                               ground_truth=gt) as sim:
        pin: list[str] = []
        if cores is not None:  # the target and the client each on its own core
            os.sched_setaffinity(sim.pid, {cores[0]})
            pin = ["taskset", "-c", str(cores[1])]
        cmd = [*pin, sys.executable, "-m", "locust", "-f", str(REPO / "loadtests"), "--headless",
               "-u", str(streams), "-r", str(streams), "-t", f"{duration_s}s", "--host", sim.url,
               "--workload", str(wl), "--results-dir", str(results), "--telemetry", telemetry,
               "--only-summary", "--loglevel", "WARNING", "ShortQueryFlood"]
        subprocess.run(cmd, check=True, capture_output=True, timeout=duration_s + 120)
    run_dir = next(p for p in results.iterdir() if p.is_dir())
    client = pd.read_parquet(run_dir / "requests.parquet")
    df = joined_requests(client, read_ground_truth(gt), warmup_s=3.0)  # skip the ramp-up
    ttft_err = (df.first_content_ts - df.first_token_ts) * 1000.0
    end_err = (df.end_ts - df.last_token_ts) * 1000.0
    events = df.content_events.sum()
    window = df.end_ts.max() - df.sent_ts.min()
    lag = df.max_emission_lag_ms.to_numpy(dtype=float)
    per_stream_tps = (df.output_tokens - 1) / ((df.e2e_ms - df.ttft_ms) / 1000.0)
    return {
        "streams": streams, "requests": len(df),
        "tokens_per_s_per_stream": float(per_stream_tps.median()),
        "content_events_per_s": float(events / window),
        "ttft_err_mean_ms": float(ttft_err.mean()), "ttft_err_p50_ms": float(ttft_err.median()),
        "ttft_err_p99_ms": float(np.percentile(ttft_err, 99)),
        "ttft_err_max_ms": float(ttft_err.max()),
        "end_err_p99_ms": float(np.percentile(end_err, 99)),
        "server_emission_lag_p99_ms": float(np.percentile(lag, 99)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", type=int, nargs="*", default=[50, 100, 200, 400])
    ap.add_argument("--tokens", type=int, default=100)
    ap.add_argument("--duration", type=int, default=20)
    ap.add_argument("--time-scale", type=float, default=1.0,
                    help="sim slowdown; pick it so tokens/s per stream is ~100 at 200 streams")
    ap.add_argument("--telemetry", default="none")
    ap.add_argument("--pin", type=int, nargs=2, metavar=("SIM_CORE", "CLIENT_CORE"),
                    help="pin the embedded target and the Locust client to these CPU cores "
                         "(on a small machine the kernel otherwise runs the client woken by a "
                         "token write on the target's core, stalling the target mid-step)")
    args = ap.parse_args()
    cols = ["streams", "requests", "tokens_per_s_per_stream", "content_events_per_s",
            "ttft_err_mean_ms", "ttft_err_p50_ms", "ttft_err_p99_ms", "ttft_err_max_ms",
            "end_err_p99_ms", "server_emission_lag_p99_ms"]
    print(" | ".join(cols))
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.streams:
            row = run_point(n, args.tokens, args.duration, args.time_scale, args.telemetry,
                            Path(tmp), tuple(args.pin) if args.pin else None)
            print(" | ".join(f"{row[c]:.3f}" if isinstance(row[c], float) else str(row[c])
                             for c in cols), flush=True)


if __name__ == "__main__":
    main()
