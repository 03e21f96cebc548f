"""zerohop's flags inside Locust (`locust -f loadtests/ --help` lists them).

Locust sends these to its workers with every spawn message, so a worker sees the same
values as the master without extra plumbing."""

from __future__ import annotations

from typing import Any

from zerohop.client.arms import parse_arm_hosts
from zerohop.core.apis import API_NAMES, DEFAULT_API
from zerohop.core.slo import parse_slo_text
from zerohop.workloads.local_tokenizer import TOKENIZER_HELP, LocalTokenizer, load_local_tokenizer

DEFAULTS: dict[str, Any] = {
    "zh_workload": [],
    "zh_api": DEFAULT_API,
    "zh_model": "",
    "zh_results_dir": "results",
    "zh_run_name": "locust",
    "zh_run_dir": "",
    "zh_slo": "",
    "zh_telemetry": "prom",
    "zh_ttft_timeout": 120.0,
    "zh_stall_timeout": 60.0,
    "zh_total_timeout": 600.0,
    "zh_seed": 1234,
    "zh_sim_args": "",
    "zh_drain_timeout": 10.0,
    "zh_no_embedded": False,
    "zh_rate_override": 0.0,
    "zh_request_count": 0,
    "zh_max_concurrency": 0,
    "zh_users_by_weight": False,
    "zh_worker_count": 0,
    "zh_audit_dir": "",
    "zh_arm_hosts": "",
    "zh_tokenizer": "",
    "zh_selection": "",  # set by the master (loadgen.selection), never by a flag
}


def add_arguments(parser: Any) -> None:
    group = parser  # Locust's own parser: its web-UI flags work only there
    group.add_argument(
        "--workload", dest="zh_workload", action="append", default=[],
        help="Workload YAML file(s); each workload in them runs as its own user class, "
        "named after the workload. Default: the files shipped in workloads/.",
    )
    group.add_argument(
        "--api", dest="zh_api", default=DEFAULTS["zh_api"],
        choices=list(API_NAMES),
        help="Streaming API flavour (a workload file may override it).",
    )
    group.add_argument(
        "--model", dest="zh_model", default="",
        help="Model name to request (default: the target's first model from /v1/models).",
    )
    group.add_argument(
        "--results-dir", dest="zh_results_dir", default=DEFAULTS["zh_results_dir"],
        help="Folder that receives one results folder per run.",
    )
    group.add_argument("--run-name", dest="zh_run_name", default=DEFAULTS["zh_run_name"],
                       help="Name appended to the run folder's timestamp.")
    group.add_argument("--run-dir", dest="zh_run_dir", default="", include_in_web_ui=False,
                       help="Use this exact run folder (created by `zerohop run`).")
    group.add_argument("--slo", dest="zh_slo", default="",
                       help="SLOs for goodput, e.g. ttft_p99_ms=500,tpot_p99_ms=50.")
    group.add_argument(
        "--telemetry", dest="zh_telemetry", default=DEFAULTS["zh_telemetry"],
        help="Telemetry sources: nvml, prom (the target's /metrics), prom=URL, loadgen; "
        "comma-separated, or none.",
    )
    group.add_argument("--ttft-timeout", dest="zh_ttft_timeout", type=float,
                       default=DEFAULTS["zh_ttft_timeout"], help="Seconds to first content.")
    group.add_argument("--stall-timeout", dest="zh_stall_timeout", type=float,
                       default=DEFAULTS["zh_stall_timeout"],
                       help="Seconds of silence mid-stream before a request is a stall.")
    group.add_argument("--total-timeout", dest="zh_total_timeout", type=float,
                       default=DEFAULTS["zh_total_timeout"], help="Seconds for a whole request.")
    group.add_argument("--seed", dest="zh_seed", type=int, default=DEFAULTS["zh_seed"],
                       help="Seed for prompts, lengths and arrivals (one stream per worker).")
    group.add_argument("--sim-args", dest="zh_sim_args", default="", include_in_web_ui=False,
                       help="Extra arguments for the embedded target (when no --host).")
    group.add_argument("--drain-timeout", dest="zh_drain_timeout", type=float,
                       default=DEFAULTS["zh_drain_timeout"],
                       help="Seconds to let in-flight requests finish at the end of a run.")
    group.add_argument("--rate-override", dest="zh_rate_override", type=float, default=0.0,
                       help="Total open-loop Poisson rate (req/s) for all workloads, split by "
                       "weight; replaces the files' load sections.")
    group.add_argument("--request-count", dest="zh_request_count", type=int, default=0,
                       help="Stop after this many requests in all (as `vllm bench serve "
                       "--num-prompts`); 0 = no limit. Split over the worker processes.")
    group.add_argument("--max-concurrency", dest="zh_max_concurrency", type=int, default=0,
                       help="At most this many open-loop requests in flight: an arrival "
                       "that finds none free waits for a slot (its wait is recorded as "
                       "queue_wait_ms); 0 = no cap. Split over the worker processes.")
    group.add_argument("--users-by-weight", dest="zh_users_by_weight", action="store_true",
                       default=False, include_in_web_ui=False,
                       help="Spread -u over the workloads by weight (Locust's way) instead of "
                       "giving each closed-loop workload its file's `users` (what `zerohop "
                       "run --users N` passes).")
    group.add_argument("--audit-records-dir", dest="zh_audit_dir", default="",
                       include_in_web_ui=False,
                       help="Also keep every process's own copy of its records here (to "
                       "audit that the master's results hold each exactly once).")
    group.add_argument("--arm-hosts", dest="zh_arm_hosts", default="", include_in_web_ui=False,
                       help="An interleaved comparison: direct=URL,layer=URL — each request "
                       "goes to one arm, drawn at random with --seed (--host stays the "
                       "target the run sizes prompts and reads models on).")
    group.add_argument("--tokenizer", dest="zh_tokenizer", default="", include_in_web_ui=False,
                       help=TOKENIZER_HELP)
    group.add_argument("--no-embedded", dest="zh_no_embedded", action="store_true",
                       default=False, include_in_web_ui=False,
                       help="Never start the embedded target; fail without --host.")


def option(environment: Any, name: str) -> Any:
    """A zerohop option from Locust's parsed options, or its default (tests and library
    use create an Environment without a parser)."""
    opts = getattr(environment, "parsed_options", None)
    if opts is not None and hasattr(opts, name):
        return getattr(opts, name)
    return DEFAULTS[name]


def local_tokenizer(environment: Any) -> LocalTokenizer | None:
    """`--tokenizer`, read (None without one); a `TokenizerPathError` (a ValueError)
    says in one line what is wrong with the path."""
    path = option(environment, "zh_tokenizer")
    return load_local_tokenizer(path) if path else None


def arm_hosts(environment: Any) -> dict[str, str]:
    """`--arm-hosts` as {arm: base URL} ({} outside an interleaved comparison); a
    ValueError names the bad part."""
    text = option(environment, "zh_arm_hosts")
    return parse_arm_hosts(text) if text else {}


def check_limits(environment: Any) -> None:
    """`--request-count` and `--max-concurrency`: whole numbers ≥ 0 (a ValueError names
    the flag)."""
    for flag, name in (("--request-count", "zh_request_count"),
                       ("--max-concurrency", "zh_max_concurrency")):
        if int(option(environment, name) or 0) < 0:
            raise ValueError(f"{flag} must be >= 0")


def parse_slo(text: str) -> dict[str, float]:
    """`ttft_p99_ms=500,tpot_p99_ms=50` → {"ttft_p99_ms": 500.0, ...} in the one SLO
    grammar (`core.slo`); a `SloError` (a ValueError) names the bad part."""
    return {target.key: target.threshold_ms for target in parse_slo_text(text, "--slo")}
