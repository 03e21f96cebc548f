"""Benchmark: real layers priced at low load against embedded replicas, beside zerohop's
0 ms pass-through (the control), in one interleaved run — and routing policies as arms.

`--what cost` (the default): N embedded replicas; vllm-router (round_robin) and nginx
(keep-alive upstream, proxy_buffering off) over all of them; `zerohop run --host
REPLICA0 --compare-layer --control --layer-url vllm-router=... --layer-url nginx=...`.
Printed: each arm's TTFT/E2E cost per percentile (p50, p90, p99) against direct and net
of the control, which replica served each arm's requests, the stream's shape.

`--what policies`: one vllm-router per policy (round_robin, power_of_two, cache_aware)
over the replicas, each an arm, with the shared-prefix workload: cache hit rate, TTFT
cost per percentile, goodput and the route distribution per arm. Run
`zerohop run --compare-layer --replicas N --route round_robin --route prefix_affinity
--workload workloads/shared_prefix.yaml` beside it for zerohop's own policies.

    python tests/bench/bench_real_layers.py --duration 60 --replicas 2
    python tests/bench/bench_real_layers.py --what policies --duration 60 --replicas 3

`--engine vllm`: the replicas are vLLM CPU servers (the vllm tier's tiny model, prefix
cache on, `cached_tokens` in usage), all confined to the last CPU and the load generator
and layers to the others, as the vllm tier does. Needs tools/vllm_cpu/setup_env.sh's venv.

    python tests/bench/bench_real_layers.py --engine vllm --duration 60 --replicas 1
    python tests/bench/bench_real_layers.py --engine vllm --what policies --replicas 2

Needs vllm-router (`pip install -e '.[layers]'`) and nginx (`apt-get install nginx`).
Run it more than once: these machines are shared and noisy.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # for tests.real_layers when run as a script

FLOOD = ("kind: short_query_flood\nname: flood\ninput_tokens: 32\nmax_tokens: 4\n"
         "load: {kind: closed, users: 4}\n")
from tests.real_layers import ENGINES  # noqa: E402

POLICIES = ("round_robin", "power_of_two", "cache_aware")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--what", choices=("cost", "policies"), default="cost")
    parser.add_argument("--duration", type=int, default=60, help="seconds of load")
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--users", type=int, default=4)
    parser.add_argument("--engine", choices=ENGINES, default="embedded")
    args = parser.parse_args()

    from tests.real_layers import start_engine_replicas, start_nginx, start_vllm_router

    work = Path(tempfile.mkdtemp(prefix="zerohop-real-layers-"))
    with ExitStack() as stack:
        urls = [url for url, _pid in start_engine_replicas(args.engine, args.replicas,
                                                             work, stack)]
        arms: list[str] = []
        if args.what == "cost":
            router = stack.enter_context(start_vllm_router(urls, "round_robin", work))
            nginx = stack.enter_context(start_nginx(urls, work, mode="stream"))
            arms += ["--control", "--layer-url", f"vllm-router={router.url}",
                     "--layer-url", f"nginx={nginx.url}"]
            workload = work / "flood.yaml"
            workload.write_text(FLOOD.replace("users: 4", f"users: {args.users}"))
            only = ["--only", "ShortQueryFlood"]
        else:
            for policy in POLICIES:
                router = stack.enter_context(start_vllm_router(urls, policy, work))
                arms += ["--layer-url", f"{policy}={router.url}"]
            workload = Path("workloads/shared_prefix.yaml")
            only = ["--users", str(args.users)]
        model = ["--model", "tiny"] if args.engine == "vllm" else []
        command = [sys.executable, "-m", "zerohop", "run", "--host", urls[0], *model,
                   "--compare-layer", *arms, "--workload", str(workload), *only,
                   "--duration", f"{args.duration}s", "--results-dir", str(work),
                   "--name", args.what, "--no-report"]
        print("$ " + " ".join(command), flush=True)
        result = subprocess.run(command, text=True, capture_output=True, check=False)
        start = result.stdout.find("layer cost")
        print(result.stdout[start:] if start >= 0 else result.stdout)
        if result.returncode != 0:
            print(result.stderr[-3000:], file=sys.stderr)
            sys.exit(result.returncode)


if __name__ == "__main__":
    main()
