"""zerohop's flags inside Locust (`locust -f loadtests/ --help` lists them).

Locust sends these to its workers with every spawn message, so a worker sees the same
values as the master without extra plumbing."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from zerohop.client.arms import parse_arm_hosts
from zerohop.core.apis import DEFAULT_API
from zerohop.core.slo import parse_slo_mapping, parse_slo_text, slo_text
from zerohop.loadgen.run_settings import flag_of
from zerohop.workloads.local_tokenizer import LocalTokenizer, load_local_tokenizer

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
    "zh_plan": "",
    "zh_probe_rate": 0.0,
    "zh_probe_prompt_tokens": 16,
    "zh_probe_output_tokens": 4,
    "zh_probe_idle": 5.0,
    "zh_answer_probe": False,
    "zh_selection": "",  # set by the master (loadgen.selection), never by a flag
}


def add_arguments(parser: Any) -> None:
    group = parser  # Locust's own parser: its web-UI flags work only there
    # the flags `zerohop run` has too: flag, help, type and choices from its settings model
    _add_run_setting(group, "workloads", "zh_workload",
                     " Each workload in them runs as its own user class, named after it.")
    _add_run_setting(group, "api", "zh_api", " A workload file may override it.")
    _add_run_setting(group, "model", "zh_model")
    _add_run_setting(group, "results_dir", "zh_results_dir")
    group.add_argument("--run-name", dest="zh_run_name", default=DEFAULTS["zh_run_name"],
                       help="Name appended to the run folder's timestamp.")
    group.add_argument("--run-dir", dest="zh_run_dir", default="", include_in_web_ui=False,
                       help="Use this exact run folder (created by `zerohop run`).")
    group.add_argument("--plan", dest="zh_plan", default="", include_in_web_ui=False,
                       help="The run's settings as `zerohop run` wrote them (plan.json in its "
                       "run folder): they replace the flags `zerohop run` shares with Locust.")
    _add_run_setting(group, "slo", "zh_slo")
    _add_run_setting(group, "telemetry", "zh_telemetry")
    group.add_argument("--ttft-timeout", dest="zh_ttft_timeout", type=float,
                       default=DEFAULTS["zh_ttft_timeout"], help="Seconds to first content.")
    group.add_argument("--stall-timeout", dest="zh_stall_timeout", type=float,
                       default=DEFAULTS["zh_stall_timeout"],
                       help="Seconds of silence mid-stream before a request is a stall.")
    group.add_argument("--total-timeout", dest="zh_total_timeout", type=float,
                       default=DEFAULTS["zh_total_timeout"], help="Seconds for a whole request.")
    _add_run_setting(group, "seed", "zh_seed")
    _add_run_setting(group, "sim_args", "zh_sim_args", " Only when no --host.",
                     include_in_web_ui=False)
    group.add_argument("--drain-timeout", dest="zh_drain_timeout", type=float,
                       default=DEFAULTS["zh_drain_timeout"],
                       help="Seconds to let in-flight requests finish at the end of a run.")
    group.add_argument("--rate-override", dest="zh_rate_override", type=float, default=0.0,
                       help="Total open-loop Poisson rate (req/s) for all workloads, split by "
                       "weight; replaces the files' load sections.")
    group.add_argument("--request-count", dest="zh_request_count", type=int, default=0,
                       help="Stop after this many requests in all (as `vllm bench serve "
                       "--num-prompts`); 0 = no limit. Split over the worker processes.")
    _add_run_setting(group, "max_concurrency", "zh_max_concurrency",
                     " 0 = no cap. Split over the worker processes.")
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
    _add_run_setting(group, "tokenizer", "zh_tokenizer", include_in_web_ui=False)
    _add_run_setting(group, "probe_rate", "zh_probe_rate", include_in_web_ui=False)
    _add_run_setting(group, "probe_prompt_tokens", "zh_probe_prompt_tokens",
                     include_in_web_ui=False)
    _add_run_setting(group, "probe_output_tokens", "zh_probe_output_tokens",
                     include_in_web_ui=False)
    group.add_argument("--probe-idle-s", dest="zh_probe_idle", type=float,
                       default=DEFAULTS["zh_probe_idle"], include_in_web_ui=False,
                       help="Seconds the probe runs alone before the load (they count in "
                       "Locust's -t).")
    group.add_argument(flag_of("answer_probe").name, dest="zh_answer_probe",
                       action="store_true", default=False, include_in_web_ui=False,
                       help=flag_of("answer_probe").help)
    group.add_argument("--no-embedded", dest="zh_no_embedded", action="store_true",
                       default=False, include_in_web_ui=False,
                       help="Never start the embedded target; fail without --host.")


def _add_run_setting(parser: Any, setting: str, dest: str, note: str = "",
                     **locust: Any) -> None:
    """One of `zerohop run`'s flags on Locust's parser, as the settings model declares it;
    the default is Locust's (`DEFAULTS`: 0 or "" where `zerohop run` has none), and `note`
    says what differs inside Locust."""
    flag = flag_of(setting)
    how: dict[str, Any] = {"dest": dest, "default": DEFAULTS[dest], "help": flag.help + note}
    if flag.choices:
        how["choices"] = list(flag.choices)
    if flag.kind in (int, float):
        how["type"] = flag.kind
    if flag.repeatable:
        how.update(action="append", default=[])
    parser.add_argument(flag.name, **how, **locust)


# `zerohop run`'s settings, read from its plan (`runner.plan.RunPlan`, as plan.json holds it)
PLAN_SECRETS_ENV = "ZEROHOP_PLAN_SECRETS"  # the plan's values redaction masked in the file
_FROM_PLAN: dict[str, Callable[[dict[str, Any]], Any]] = {
    "zh_workload": lambda plan: list(plan["workloads"]),
    "zh_api": lambda plan: plan["api"],
    "zh_model": lambda plan: plan["model"],
    "zh_slo": lambda plan: slo_text(parse_slo_mapping(plan["slo"], "plan.json slo")),
    "zh_telemetry": lambda plan: plan["telemetry"],
    "zh_seed": lambda plan: plan["seed"],
    "zh_tokenizer": lambda plan: plan["tokenizer"] or "",
    "zh_rate_override": lambda plan: plan["rate"] or 0.0,
    "zh_request_count": lambda plan: plan["requests"] or 0,
    "zh_max_concurrency": lambda plan: plan["max_concurrency"] or 0,
    "zh_probe_rate": lambda plan: plan.get("probe_rate") or 0.0,
    "zh_probe_prompt_tokens": lambda plan: plan.get("probe_prompt_tokens") or 16,
    "zh_probe_output_tokens": lambda plan: plan.get("probe_output_tokens") or 4,
    "zh_probe_idle": lambda plan: plan.get("probe_idle_s") or 0.0,
    "zh_answer_probe": lambda plan: bool(plan.get("answer_probe")),
}


def apply_plan(environment: Any) -> None:
    """With `--plan`: the run's settings from `zerohop run`'s plan.json (and the values it
    masked there, from `PLAN_SECRETS_ENV`) in place of the flags; the master sends them on
    to its workers with every spawn message, as it does the flags. An unreadable plan is a
    ValueError that names it."""
    opts = getattr(environment, "parsed_options", None)
    path = getattr(opts, "zh_plan", "") if opts is not None else ""
    if not path:
        return
    try:
        plan = json.loads(Path(path).read_text())
        plan.update(json.loads(os.environ.get(PLAN_SECRETS_ENV) or "{}"))
        values = {name: read(plan) for name, read in _FROM_PLAN.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"--plan {path}: not a plan zerohop run wrote ({exc!r})") from None
    vars(opts).update(values)


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


def telemetry_sources(environment: Any) -> list[Any]:
    """`--telemetry`, parsed (a ValueError names the bad part); a bare `prom` is the
    target's own /metrics."""
    from zerohop.telemetry.spec import run_sources

    return list(run_sources(option(environment, "zh_telemetry"), environment.host))


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
