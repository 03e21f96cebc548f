"""Speed benchmark for `zerohop simulate` (a script, not a timed test).

Simulates `--minutes` (default 60) of a flat 48k req/s Poisson load of short queries
(16-64 prompt tokens, 16 answer tokens: the promotion burst's requests) on `--replicas`
modelled H100s running Llama-3.1-8B, no layer, writing a 0.1 % records sample, and
prints the wall time, the requests simulated per wall second and, for a shorter run,
the wall time an hour would take at that speed. Goal: a simulated hour in under 60 s.
`--simulated-replicas K` runs K of the replicas on their round-robin share of the
arrivals, standing for all of them (`zerohop simulate --simulated-replicas`).

    .venv/bin/python tests/bench/bench_simulate_hour.py [--minutes M] [--replicas N]
        [--simulated-replicas K] [--repeat R]

Numbers on a shared machine are noisy: run it three times and quote the median.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from zerohop.fleet.run import SimulationPlan, run_simulation
from zerohop.sim.config import load_config
from zerohop.sim.embedded import EMBEDDED_TARGET_CONFIG

GOAL_S = 60.0
WORKLOAD = """\
kind: short_query_flood
name: hour
input_tokens: {{type: uniform, min: 16, max: 64}}
max_tokens: 16
ignore_eos: true
load: {{kind: open, rate_rps: {rate}}}
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--rate", type=float, default=48_000.0)
    parser.add_argument("--replicas", type=int, default=128)
    parser.add_argument("--simulated-replicas", type=int, default=None)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    config = load_config(Path(str(EMBEDDED_TARGET_CONFIG)), {})
    speeds = []
    with tempfile.TemporaryDirectory() as tmp:
        workload = Path(tmp) / "hour.yaml"
        workload.write_text(WORKLOAD.format(rate=args.rate))
        for _ in range(args.repeat):
            result = run_simulation(SimulationPlan(
                workload=workload, duration_s=args.minutes * 60, config=config,
                replicas=args.replicas, simulated_replicas=args.simulated_replicas,
                record_sample=0.001, results_dir=Path(tmp) / "r",
                drain_s=5.0, tick_s=1.0))
            s = result.summary
            fleet_rps = s["offered_rps"] * s["simulated_s"] / s["wall_s"]
            speeds.append(fleet_rps)
            print(f"simulated {s['simulated_s']:g} s at {s['offered_rps']:.0f} req/s on "
                  f"{s['simulated_replicas']} of {args.replicas} replicas "
                  f"({s['arrivals']} requests run): {s['wall_s']:.1f} s wall, "
                  f"{s['requests_per_wall_s']:.0f} req/s run, {fleet_rps:.0f} fleet req/s "
                  "per wall second")
    speed = statistics.median(speeds)
    hour_s = args.rate * 3600 / speed
    verdict = "meets" if hour_s < GOAL_S else f"misses ({hour_s / GOAL_S:.1f}x)"
    print(f"median {speed:.0f} fleet req/s per wall second -> an hour at {args.rate:.0f} "
          f"req/s takes {hour_s:.0f} s wall; the {GOAL_S:.0f} s goal: {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
