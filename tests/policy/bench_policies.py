"""Client policies against the embedded target pushed past capacity (issue 11).

For each shipped `workloads/policies_*.yaml` (no retry, naive retry ×5, backoff + jitter +
cap, fallback chain): a fresh three-model sim (`src/zerohop/data/fallback_models.yaml`),
Poisson arrivals at R req/s (past the large model's capacity) for D seconds, each
logical request in its own greenlet, driving `LLMClient` through `PolicyExecutor`; arrivals
are dealt round-robin to U users, each with its own in-flight retry budget;
every attempt written to a real results folder; then the policy figures per run, one
`zerohop compare` page over the runs (the first, no retry, is the baseline) and the
issue's claims checked against that comparison's figures and verdicts.

The target is past capacity by two mechanisms: the large model's KV cache (a sequence
that would be preempted fails with out_of_memory) and a waiting queue of 32 (more gets
HTTP 503 at once). The queue is deep enough that waiting in it costs seconds, so a
retried request pays for every admitted attempt, and its retries hold queue places
that other users' first attempts then wait behind or are refused: that is what makes
a retry storm slow for the user, not only heavy for the server. (With a queue of 8,
retries are refused in a millisecond and cost the user almost nothing.)

    python tests/policy/bench_policies.py                      # 16 req/s, 15 s each
    python tests/policy/bench_policies.py --rate 20 --duration 20 --out /tmp/pol

Numbers on a shared 2-core machine are noisy: read the direction, not the digits.
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402
import random  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import gevent  # noqa: E402
import pandas as pd  # noqa: E402
from gevent.pool import Group  # noqa: E402

REPO = Path(__file__).resolve().parents[2]

from zerohop.analysis.comparison.compare import LogicalComparison  # noqa: E402
from zerohop.analysis.latency.policy import summarise_policy  # noqa: E402
from zerohop.client.api_adapters import create_api_adapter  # noqa: E402
from zerohop.client.http_stream import Timeouts  # noqa: E402
from zerohop.client.llm_client import LLMClient, RequestSpec  # noqa: E402
from zerohop.client.policy import PolicyExecutor, RetryBudget, client_timeouts  # noqa: E402
from zerohop.client.protocols import GenerationRequest  # noqa: E402
from zerohop.core.layout import REQUESTS_FILE  # noqa: E402
from zerohop.core.records import ClockAnchor  # noqa: E402
from zerohop.report.build import compare_dirs  # noqa: E402
from zerohop.sim.launcher import start_sim  # noqa: E402
from zerohop.storage import run_folder as results  # noqa: E402
from zerohop.workloads.schema.policy_spec import Policy  # noqa: E402
from zerohop.workloads.yaml_io import load_workload_file  # noqa: E402

CONFIG = REPO / "src" / "zerohop" / "data" / "fallback_models.yaml"
POLICIES = ("no_retry", "naive_retry", "backoff", "fallback")
NAIVE_MIN_AMPLIFICATION = 1.5  # the bar for a retry storm
NEAR_ONE_MAX_AMPLIFICATION = 1.2  # what "near 1" is taken to mean for backoff + cap


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=16.0)
    parser.add_argument("--users", type=int, default=1,
                        help="retry budgets (1: one open-loop dispatcher, as under Locust)")
    parser.add_argument("--duration", type=float, default=15.0)
    parser.add_argument("--sim-args", default="--max-queue 32")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="zh-policies-"))
    run_dirs = [run_policy(name, args, out) for name in POLICIES]
    print(f"\n{'policy':<14}{'logical':>8}{'attempts':>9}{'amplif.':>8}{'success':>9}"
          f"{'p50 ms':>9}{'p99 ms':>9}{'p99 ok ms':>10}  answered by")
    for name, run_dir in zip(POLICIES, run_dirs, strict=True):
        s = summarise_policy(pd.read_parquet(run_dir / REQUESTS_FILE))
        assert s is not None
        shares = ", ".join(f"{m} {v:.0%}" for m, v in s.answered_share.items())
        print(f"{name:<14}{s.logical_requests:>8}{s.attempts:>9}{s.amplification:>8.2f}"
              f"{s.success_rate:>9.1%}{s.logical_e2e_p50_ms:>9.0f}{s.logical_e2e_p99_ms:>9.0f}"
              f"{s.answered_e2e_p99_ms:>10.0f}  {shares}")
    page = out / "compare.html"
    print()
    subprocess.run([sys.executable, "-m", "zerohop", "compare", *map(str, run_dirs),
                    "--output", str(page)], check=True)
    print(f"compare page: {page}")
    print_claims({c.candidate: c.logical for c in compare_dirs(run_dirs)}, run_dirs)


def print_claims(logical: dict[str, LogicalComparison | None], run_dirs: list[Path]) -> None:
    """The issue's claims, each with the figures (and the comparison's verdict) it rests on;
    the comparison is the page's own (same seed and settings)."""
    naive, backoff, fallback = (logical[d.name] for d in run_dirs[1:])
    assert naive is not None and backoff is not None and fallback is not None
    p99 = next(r for r in naive.latency if r.stat == "p99")
    claims = [
        (f"naive retry amplification {naive.candidate.amplification:.2f} > "
         f"{NAIVE_MIN_AMPLIFICATION}", naive.candidate.amplification > NAIVE_MIN_AMPLIFICATION),
        (f"naive retry logical E2E p99 {p99.candidate:,.0f} ms vs no retry {p99.base:,.0f} ms "
         f"({p99.delta_pct:+.0f} %, interval [{p99.ci_low:+,.0f}, {p99.ci_high:+,.0f}] ms, "
         f"verdict {p99.verdict})", p99.verdict == "worse"),
        (f"backoff + jitter + cap amplification {backoff.candidate.amplification:.2f} <= "
         f"{NEAR_ONE_MAX_AMPLIFICATION}",
         backoff.candidate.amplification <= NEAR_ONE_MAX_AMPLIFICATION),
        (f"fallback logical success {fallback.candidate.success_rate:.1%} vs no retry "
         f"{fallback.base.success_rate:.1%} (verdict {fallback.success.verdict})",
         fallback.success.verdict == "better"),
    ]
    print("\nissue 11 claims:")
    for text, holds in claims:
        print(f"  {'holds' if holds else 'DOES NOT HOLD'}: {text}")


def run_policy(name: str, args: argparse.Namespace, out: Path) -> Path:
    spec = load_workload_file(REPO / "workloads" / f"policies_{name}.yaml").workloads[0]
    run_dir = results.new_run_dir(out, spec.name)
    sim_args = ["--config", str(CONFIG), "--seed", "3", *args.sim_args.split()]
    with start_sim(sim_args) as sim:
        results.start_manifest(
            run_dir, name=spec.name,
            target={"url": sim.url, "kind": "embedded", "api": "openai-chat"},
            workloads=[{"file": f"workloads/policies_{name}.yaml"}],
            load={"mode": "open", "users": args.users, "rate_rps": args.rate,
                  "duration_s": args.duration},
            slo={}, config={"sim_args": " ".join(sim_args), "policy": spec.policy.model_dump()},
        )
        sink = results.RecordSink(run_dir, "bench")
        anchor = ClockAnchor.now()
        client = LLMClient(sim.url, create_api_adapter("openai-chat"), api_key=None,
                           timeouts=client_timeouts(spec.policy, Timeouts()), anchor=anchor,
                           id_prefix=name)
        executors = [_executor(spec.policy, client, sink, seed) for seed in range(args.users)]
        _open_loop(spec, executors, args.rate, args.duration)
        client.close()
        sink.close()
        stats = _sim_stats(sim.url)
    results.consolidate(run_dir)
    results.finish_manifest(run_dir, status="ok", end_reason="duration", sim_stats=stats)
    print(f"{name}: {run_dir}  server: {stats}")
    return run_dir


def _executor(policy: Policy | None, client: LLMClient, sink: results.RecordSink,
              seed: int) -> PolicyExecutor:
    retry = policy.retry if policy is not None else None
    return PolicyExecutor(
        policy, attempt=client.execute, rng=random.Random(seed), sleep=gevent.sleep,
        budget=RetryBudget(retry.max_in_flight if retry is not None else None),
        emit=lambda r: sink.add(r.to_row()),
    )


def _open_loop(spec: Any, executors: list[PolicyExecutor], rate: float, duration: float) -> None:
    """Poisson arrivals on the clock, whatever the responses do (no coordinated omission)."""
    rng = random.Random(7)
    prompt = " ".join(["word"] * spec.input_tokens.value)
    group = Group()
    start = time.monotonic()
    due, n = 0.0, 0
    while due < duration:
        wait = start + due - time.monotonic()
        if wait > 0:
            gevent.sleep(wait)
        gen = GenerationRequest(model=spec.model, max_tokens=spec.max_tokens.value,
                                prompt=prompt, ignore_eos=True)
        request = RequestSpec(workload=spec.name, generation=gen,
                              target_input_tokens=spec.input_tokens.value)
        group.spawn(executors[n % len(executors)].run, request, f"{spec.name}-{n}")
        n += 1
        due += rng.expovariate(rate)
    group.join()


def _sim_stats(url: str) -> dict[str, dict[str, int]]:
    import json
    import urllib.request

    with urllib.request.urlopen(url + "/zerohop/stats", timeout=5) as resp:
        data = json.loads(resp.read())
    return {e["name"]: {k: e[k] for k in ("generation_tokens", "prompt_tokens", "preemptions",
                                          "oom_failures", "rejected")}
            for e in data["engines"]}


if __name__ == "__main__":
    main()
