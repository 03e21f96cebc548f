"""Benchmark: the layer's knee — the offered rate at which a real router's added latency
starts to grow — with the router held to a CPU quota so the knee falls within one
2-core machine's reach.

Embedded replicas (cheap, several, so they stay far from saturation) behind vllm-router
(round_robin); the router's process is put in a cgroup with a CPU quota (as root:
`cpu.cfs_quota_us` under cgroup v1, `cpu.max` under v2; removed at the end). At each
offered rate of the ladder, one interleaved run (`zerohop run --host REPLICA0
--compare-layer --layer-url router=URL --rate R`) prices the hop; meanwhile the router's
CPU and memory and the replicas' CPU are read by pid (psutil, over the load window),
and the quota's throttling from the cgroup's cpu.stat.

Printed per quota and rate: the TTFT cost at p50 and p99 (ms, with 95% intervals), the
router's CPU (% of one core; of its quota) and RSS, the busiest replica's CPU. The knee
is the product's (`zerohop.analysis.comparison.layer_knee.find_knee`, as `zerohop sweep
--compare-layer` reports it): the lowest rate whose cost exceeds the lowest rate's by
more than `--knee-ms` (fixed in advance) and whose interval lies above the lowest
rate's; per core of the layer it is knee ÷ quota (cores). Run two quotas (`--quotas
0.1 0.05`) to check that halving the quota halves the knee.

    sudo python tests/bench/bench_layer_knee.py --quotas 0.1 0.05 --rates 20 40 80 120 160

`--engine vllm`: the replicas are vLLM CPU servers instead (the vllm tier's tiny model,
all on the last CPU; the replica CPU column is then each server's whole process tree,
its engine core included): whether the engines or the quota-held router bend first.

Needs vllm-router (`pip install -e '.[layers]'`) and root for the cgroup.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # for tests.real_layers when run as a script

from tests.real_layers import ENGINES  # noqa: E402

from zerohop.analysis.comparison.layer_knee import KNEE_GROWTH_MS, CostAt, find_knee  # noqa: E402

FLOOD = ("kind: short_query_flood\nname: flood\ninput_tokens: 32\nmax_tokens: 4\n"
         "load: {kind: closed, users: 1}\n")
PERIOD_US = 100_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quotas", type=float, nargs="+", default=[0.1, 0.05],
                        help="the router's CPU quota, in cores")
    parser.add_argument("--rates", type=float, nargs="+", default=[20, 40, 80, 120, 160])
    parser.add_argument("--duration", type=int, default=15, help="seconds per rate")
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--engine", choices=ENGINES, default="embedded",
                        help="vllm: vLLM CPU servers (the vllm tier's tiny model) on the "
                             "last CPU")
    parser.add_argument("--knee-ms", type=float, default=KNEE_GROWTH_MS,
                        help="cost growth over the lowest rate's that marks the knee "
                             "(the product's threshold by default)")
    args = parser.parse_args()

    import psutil
    from tests.real_layers import start_engine_replicas, start_vllm_router

    work = Path(tempfile.mkdtemp(prefix="zerohop-knee-"))
    model = ["--model", "tiny"] if args.engine == "vllm" else []
    workload = work / "flood.yaml"
    workload.write_text(FLOOD)
    knees = {}
    with ExitStack() as stack:
        replicas = start_engine_replicas(args.engine, args.replicas, work, stack)
        urls = [url for url, _pid in replicas]
        engines = [psutil.Process(pid) for _url, pid in replicas]
        for quota in args.quotas:
            router = start_vllm_router(urls, "round_robin", work, name=f"router-{quota}")
            cgroup = _limit_cpu(router.pid, quota, f"zerohop-knee-{os.getpid()}-{quota}")
            try:
                print(f"== router CPU quota {quota:g} cores (pid {router.pid})")
                print(f"{'rate':>6} {'p50 cost':>24} {'p99 cost':>24} {'router CPU':>11} "
                      f"{'of quota':>8} {'RSS MB':>7} {'busiest replica CPU':>20} "
                      f"{'throttled':>14}")
                rows = []
                for rate in args.rates:
                    row = _one_rate(rate, args.duration, urls[0], router, engines, workload,
                                    work, psutil.Process(router.pid), cgroup, model)
                    rows.append(row)
                    print(f"{rate:>6g} {_cell(row, 'p50'):>24} {_cell(row, 'p99'):>24} "
                          f"{row['router_cpu_pct']:>10.1f}% "
                          f"{row['router_cpu_pct'] / quota:>7.0f}% {row['router_rss_mb']:>7.1f} "
                          f"{row['engine_cpu_pct']:>19.1f}% "
                          f"{row['throttled_periods']:>5.0f}× {row['throttled_ms']:>6.0f}ms",
                          flush=True)
                knees[quota] = _knee(rows, "p50", args.knee_ms)
                p99 = _knee(rows, "p99", args.knee_ms)
                print(f"   p99 knee: {'none within the rates tried' if p99 is None else p99}")
            finally:
                router.stop()
                _remove_cgroup(cgroup)
    print()
    for quota, knee in knees.items():
        if knee is None:
            print(f"quota {quota:g} cores: no knee within {args.rates[-1]:g} req/s")
        else:
            print(f"quota {quota:g} cores: knee at {knee:g} req/s offered "
                  f"(≈ {knee / quota:.0f} req/s per core of the layer)")
    found = [(q, k) for q, k in knees.items() if k is not None]
    if len(found) >= 2:
        (q1, k1), (q2, k2) = found[0], found[1]
        print(f"quota ×{q2 / q1:.2f} → knee ×{k2 / k1:.2f} (halving the quota should halve it)")


def _one_rate(rate: float, duration: int, direct: str, router, engines, workload: Path,
              work: Path, router_process, cgroup: Path, model: list[str]) -> dict:
    name = f"rate{rate:g}-{time.time_ns()}"
    cpu0 = _cpu_s(router_process)
    engine0 = [_cpu_s(e) for e in engines]
    throttled0 = _throttled(cgroup)
    result = subprocess.run(
        [sys.executable, "-m", "zerohop", "run", "--host", direct, *model, "--compare-layer",
         "--layer-url", f"router={router.url}", "--workload", str(workload), "--only",
         "ShortQueryFlood", "--rate", str(rate), "--duration", f"{duration}s",
         "--results-dir", str(work), "--name", name, "--no-report"],
        text=True, capture_output=True, check=False)
    wall = float(duration)  # the load window: CPU outside it (start-up probes) is small
    cpu = _cpu_s(router_process) - cpu0
    throttled = [b - a for a, b in zip(throttled0, _throttled(cgroup), strict=True)]
    busiest = max(_cpu_s(e) - before for e, before in zip(engines, engine0, strict=True))
    files = sorted(work.glob(f"compare-*{name}*-arms.json"))
    if result.returncode not in (0, 1) or not files:
        print(result.stderr[-2000:], file=sys.stderr)
        raise SystemExit(f"the run at {rate:g} req/s failed (exit {result.returncode})")
    budget = json.loads(files[-1].read_text())
    return {"rate": rate, "cost": budget["layer_cost_ms"]["ttft_ms"],
            "ci": budget["ci95_ms"]["ttft_ms"], "router_cpu_pct": 100 * cpu / wall,
            "router_rss_mb": router_process.memory_info().rss / 2**20,
            "engine_cpu_pct": 100 * busiest / wall,
            "throttled_periods": throttled[0], "throttled_ms": throttled[1]}


def _throttled(group: Path) -> tuple[float, float]:
    """(periods throttled, ms throttled) so far, from the cgroup's cpu.stat (v1 counts
    ns, v2 µs)."""
    stat = {}
    for line in (group / "cpu.stat").read_text().splitlines():
        key, _, value = line.partition(" ")
        stat[key] = float(value or 0)
    if "throttled_time" in stat:
        return stat.get("nr_throttled", 0.0), stat["throttled_time"] / 1e6
    return stat.get("nr_throttled", 0.0), stat.get("throttled_usec", 0.0) / 1e3


def _cpu_s(process) -> float:
    """CPU seconds of the process and its live children (vLLM's engine core is one)."""
    total = 0.0
    for each in [process, *process.children(recursive=True)]:
        times = each.cpu_times()
        total += times.user + times.system
    return float(total)


def _cell(row: dict, stat: str) -> str:
    low, high = row["ci"][stat]
    return f"{row['cost'][stat]:+.2f} [{low:+.2f}, {high:+.2f}]"


def _knee(rows: list[dict], stat: str, growth_ms: float) -> float | None:
    """The product's knee (analysis.layer_knee) over this quota's rows."""
    costs = [CostAt(row["rate"], row["cost"][stat], *row["ci"][stat]) for row in rows]
    return find_knee(costs, stat, growth_ms).rate


def _limit_cpu(pid: int, cores: float, name: str) -> Path:
    """Put `pid` in a new cgroup holding it to `cores` of CPU (v1 cpu controller, or v2
    cpu.max); the cgroup's folder is returned for `_remove_cgroup`."""
    quota = max(1000, int(cores * PERIOD_US))
    v1 = Path("/sys/fs/cgroup/cpu")
    if (v1 / "cpu.cfs_quota_us").exists():
        group = v1 / name
        group.mkdir()
        (group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
        (group / "cpu.cfs_quota_us").write_text(str(quota))
    else:
        group = Path("/sys/fs/cgroup") / name
        group.mkdir()
        (group / "cpu.max").write_text(f"{quota} {PERIOD_US}")
    (group / "cgroup.procs").write_text(str(pid))
    return group


def _remove_cgroup(group: Path) -> None:
    """rmdir the cgroup once its process has exited (bounded wait)."""
    for _ in range(50):
        try:
            group.rmdir()
            return
        except OSError:
            time.sleep(0.1)
    print(f"warning: cgroup {group} left behind (still busy)", file=sys.stderr)


if __name__ == "__main__":
    main()
