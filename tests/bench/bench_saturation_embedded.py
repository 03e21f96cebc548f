"""zerohop's saturation detector beside GuideLLM's published rule on the embedded target
(real time, real client; a script, not a timed test; docs/saturation.md).

Measures the target's capacity first (the completions a second of a run offered far
more than it serves, over the last two thirds of its window), then runs an overload and
a control as `zerohop run`s. Both detectors read each run's records: zerohop's through
the replay (`analysis/server/saturation_replay.py`: what the run had seen at each second),
GuideLLM's rule through every request's start (with the requests in flight then) and
end (with its TTFT). Prints one row per case.

    .venv/bin/python tests/bench/bench_saturation_embedded.py [--control-s 180]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `tests` as a package

from tests.fleet.guidellm_rule import GuideLLMRule

from zerohop.analysis.server.saturation_replay import replay_verdict

WORKLOAD = """\
kind: short_query_flood
name: flood
input_tokens: 512
max_tokens: 256
ignore_eos: true
load: {{kind: open, rate_rps: {rate}, arrival: poisson}}
"""


def run(folder: Path, rate: float, duration_s: float) -> pd.DataFrame:
    """One `zerohop run` against the embedded target; its records."""
    workload = folder / f"flood-{rate:g}.yaml"
    workload.write_text(WORKLOAD.format(rate=rate))
    results = folder / f"results-{rate:g}"
    subprocess.run([sys.executable, "-m", "zerohop", "run", "--workload", str(workload),
                    "--duration", f"{duration_s:g}s", "--no-report", "--microbench", "off",
                    "--telemetry", "loadgen", "--results-dir", str(results)],
                   check=False, capture_output=True, timeout=duration_s + 300)
    (run_dir,) = results.iterdir()
    return pd.read_parquet(run_dir / "requests.parquet")


def served_rps(frame: pd.DataFrame) -> float:
    start = float(frame["scheduled_ts"].min())
    ends = np.sort(frame.loc[frame["outcome"] == "ok", "end_ts"].to_numpy(dtype=float))
    last = float(frame["scheduled_ts"].max())
    t0 = start + (last - start) / 3
    return float(((ends > t0) & (ends <= last)).sum() / (last - t0))


def guidellm_alarm(frame: pd.DataFrame) -> float | None:
    """When the published rule would have stopped this run, seconds from its start."""
    start = float(frame["scheduled_ts"].min())
    sent = frame["sent_ts"].to_numpy(dtype=float) - start
    end = frame["end_ts"].to_numpy(dtype=float) - start
    ttft = frame["first_content_ts"].to_numpy(dtype=float) - frame["sent_ts"].to_numpy(
        dtype=float)
    ok = frame["outcome"].to_numpy() == "ok"
    events = sorted([(s, 0, i) for i, s in enumerate(sent)]
                    + [(e, 1, i) for i, e in enumerate(end) if np.isfinite(e)])
    rule, in_flight = GuideLLMRule(), 0
    for at, kind, i in events:
        if kind == 0:
            in_flight += 1
            rule.started(at, in_flight)
        else:
            in_flight -= 1
            rule.finished(at, float(ttft[i]) if ok[i] and np.isfinite(ttft[i]) else None)
        if rule.alarm_s is not None:
            return rule.alarm_s
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--overload-s", type=float, default=60.0)
    parser.add_argument("--control-s", type=float, default=180.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        capacity = served_rps(run(folder, 80.0, 40.0))
        print(f"embedded target capacity at 512 / 256 tokens: {capacity:.1f} req/s "
              "(completions under an 80 req/s offer)")
        print("| case | kind | zerohop | GuideLLM's rule |\n|---|---|---|---|")
        for name, share, seconds, control in (
                ("overload from the start (1.5x)", 1.5, args.overload_s, False),
                (f"80 % of capacity, {args.control_s:.0f} s", 0.8, args.control_s, True)):
            frame = run(folder, round(share * capacity, 1), seconds)
            ours = replay_verdict(frame).detected_s
            theirs = guidellm_alarm(frame)
            cells = [_cell(at, control) for at in (ours, theirs)]
            print(f"| {name} | {'control' if control else 'overload'} | "
                  f"{cells[0]} | {cells[1]} |")


def _cell(at: float | None, control: bool) -> str:
    if at is None:
        return "no false alarm" if control else "never"
    return f"false alarm at {at:.0f} s" if control else f"{at:.0f} s"


if __name__ == "__main__":
    main()
