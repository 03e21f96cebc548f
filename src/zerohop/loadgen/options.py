"""zerohop's flags inside Locust (`locust -f loadtests/ --help` lists them), and the
settings they carry, read back as the types that declare them.

`zerohop run`'s settings that Locust takes too (the `RunSettings` fields whose flag says
`locust`) are generated from that model under the same flag; Locust's own run options
(timeouts, the run folder, the plan) are `LocustOptions`, declared the same way. The
Locust process that `zerohop run` starts reads its settings from plan.json instead
(`apply_plan`). Locust sends its parsed options to its workers with every spawn message,
so a worker sees the same values as the master without extra plumbing; code reads them
as `run_settings(environment).rate`, never by a string key."""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zerohop.client.arms import parse_arm_hosts
from zerohop.core.slo import parse_slo_mapping, slo_text
from zerohop.loadgen.run_settings import Flag, RunSettings, flag, setting_fields
from zerohop.loadgen.run_settings import parse_slo as parse_slo  # capacity's --slo
from zerohop.workloads.content.local_tokenizer import LocalTokenizer, load_local_tokenizer

DEST = "zh_"  # zerohop's values in Locust's parsed options: `zh_` + the field's name
LOCUST_DEFAULTS: dict[str, Any] = {"telemetry": "prom"}  # Locust by hand: no own sampler
_NOTES = {  # what a setting means differently inside Locust, after its help
    "workloads": " Each workload in them runs as its own user class, named after it.",
    "api": " A workload file may override it.",
    "sim_args": " Only when no --host.",
    "max_concurrency": " Split over the worker processes.",
    "requests": " Split over the worker processes.",
}
# set by the master while it runs, never by a flag: they reach the workers with the
# spawn message as the flags do
WORKER_COUNT = "zh_worker_count"
SELECTION = "zh_selection"


@dataclass(frozen=True)
class LocustOptions:
    """Locust's own zerohop options: how one Locust process runs, not what is run."""

    run_name: str = field(default="locust", metadata=flag(
        "--run-name", "Name appended to the run folder's timestamp."))
    run_dir: str = field(default="", metadata=flag(
        "--run-dir", "Use this exact run folder (created by `zerohop run`).", in_web_ui=False))
    plan: str = field(default="", metadata=flag(
        "--plan", "The run's settings as `zerohop run` wrote them (plan.json in its run "
        "folder): they replace the flags `zerohop run` shares with Locust.", in_web_ui=False))
    ttft_timeout: float = field(default=120.0, metadata=flag(
        "--ttft-timeout", "Seconds to first content.", kind=float))
    stall_timeout: float = field(default=60.0, metadata=flag(
        "--stall-timeout", "Seconds of silence mid-stream before a request is a stall.",
        kind=float))
    total_timeout: float = field(default=600.0, metadata=flag(
        "--total-timeout", "Seconds for a whole request.", kind=float))
    drain_timeout: float = field(default=10.0, metadata=flag(
        "--drain-timeout", "Seconds to let in-flight requests finish at the end of a run.",
        kind=float))
    users_by_weight: bool = field(default=False, metadata=flag(
        "--users-by-weight", "Spread -u over the workloads by weight (Locust's way) instead "
        "of giving each closed-loop workload its file's `users` (what `zerohop run --users "
        "N` passes).", kind=bool, in_web_ui=False))
    audit_records_dir: str = field(default="", metadata=flag(
        "--audit-records-dir", "Also keep every process's own copy of its records here (to "
        "audit that the master's results hold each exactly once).", in_web_ui=False))
    arm_hosts: str = field(default="", metadata=flag(
        "--arm-hosts", "An interleaved comparison: direct=URL,layer=URL — each request goes "
        "to one arm, drawn at random with --seed (--host stays the target the run sizes "
        "prompts and reads models on).", in_web_ui=False))
    no_embedded: bool = field(default=False, metadata=flag(
        "--no-embedded", "Never start the embedded target; fail without --host.", kind=bool,
        in_web_ui=False))


def locust_settings() -> list[tuple[str, Flag, Any]]:
    """(name, flag, Locust's default) of each `RunSettings` field Locust takes."""
    return [(name, flag, LOCUST_DEFAULTS.get(name, default))
            for name, flag, default in setting_fields() if flag.locust]


def _locust_options() -> list[tuple[str, Flag, Any]]:
    return [(f.name, f.metadata["flag"], f.default) for f in dataclasses.fields(LocustOptions)]


def add_arguments(parser: Any) -> None:
    """Locust's parser (its web-UI flags work only there): the run settings it takes,
    then its own options."""
    for name, flag_, default in locust_settings():
        _add(parser, name, flag_, default, _NOTES.get(name, ""))
    for name, flag_, default in _locust_options():
        _add(parser, name, flag_, default)


def _add(parser: Any, name: str, flag_: Flag, default: Any, note: str = "") -> None:
    """One flag on Locust's parser, its value kept as JSON (what a spawn message carries)."""
    how: dict[str, Any] = {"dest": DEST + name, "help": flag_.help + note}
    if flag_.kind is bool:
        how.update(action="store_true", default=default)
    elif flag_.repeatable:
        how.update(action="append", default=[])
    else:
        how["default"] = str(default) if isinstance(default, Path) else default
    if flag_.choices:
        how["choices"] = list(flag_.choices)
    elif flag_.kind is not bool:
        how["metavar"] = name.upper()  # not the dest's prefixed name
    if flag_.kind in (int, float):
        how["type"] = flag_.kind
    if not flag_.in_web_ui:
        how["include_in_web_ui"] = False
    parser.add_argument(flag_.name, **how)


def _values(environment: Any, names: list[tuple[str, Flag, Any]]) -> dict[str, Any]:
    """The parsed values of these options (none without a parser: tests and library use
    create an Environment without one)."""
    opts = getattr(environment, "parsed_options", None)
    return {name: getattr(opts, DEST + name) for name, _, _ in names
            if opts is not None and hasattr(opts, DEST + name)}


def run_settings(environment: Any) -> RunSettings:
    """The run's settings: plan.json's under `zerohop run` (`apply_plan`), else Locust's
    flags; Locust's defaults for any it was not given."""
    return RunSettings.from_json({**LOCUST_DEFAULTS, **_values(environment, locust_settings())})


def locust_options(environment: Any) -> LocustOptions:
    """Locust's own zerohop options, as given (their defaults otherwise)."""
    return LocustOptions(**_values(environment, _locust_options()))


# `zerohop run`'s settings, read from its plan (`runner.plan.RunPlan`, as plan.json holds it)
PLAN_SECRETS_ENV = "ZEROHOP_PLAN_SECRETS"  # the plan's values redaction masked in the file


def settings_from_plan(plan: dict[str, Any]) -> RunSettings:
    """The settings Locust takes, from a plan document: each by its name, and the three
    the plan holds worked out (SLOs, the target's arguments, the probe's idle phase) as
    the text they were given in."""
    taken = {name for name, _, _ in locust_settings()}
    given = {name: value for name, value in plan.items() if name in taken}
    given.update(slo=slo_text(parse_slo_mapping(plan["slo"], "plan.json slo")),
                 sim_args=shlex.join(plan["sim_args"]), probe_idle=f"{plan['probe_idle_s']}s")
    return RunSettings.from_json(given)


def apply_plan(environment: Any) -> None:
    """With `--plan`: the run's settings from `zerohop run`'s plan.json (and the values it
    masked there, from `PLAN_SECRETS_ENV`) in place of the flags; the master sends them on
    to its workers with every spawn message, as it does the flags. An unreadable plan is a
    ValueError that names it."""
    path = locust_options(environment).plan
    if not path:
        return
    try:
        plan = json.loads(Path(path).read_text())
        plan.update(json.loads(os.environ.get(PLAN_SECRETS_ENV) or "{}"))
        settings = settings_from_plan(plan).to_json()
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"--plan {path}: not a plan zerohop run wrote ({exc!r})") from None
    vars(environment.parsed_options).update(
        {DEST + name: settings[name] for name, _, _ in locust_settings()})


def local_tokenizer(environment: Any) -> LocalTokenizer | None:
    """`--tokenizer`, read (None without one); a `TokenizerPathError` (a ValueError)
    says in one line what is wrong with the path."""
    path = run_settings(environment).tokenizer
    return load_local_tokenizer(path) if path else None


def telemetry_sources(environment: Any) -> list[Any]:
    """`--telemetry`, parsed (a ValueError names the bad part); a bare `prom` is the
    target's own /metrics."""
    from zerohop.telemetry.spec import run_sources

    return list(run_sources(run_settings(environment).telemetry, environment.host))


def arm_hosts(environment: Any) -> dict[str, str]:
    """`--arm-hosts` as {arm: base URL} ({} outside an interleaved comparison); a
    ValueError names the bad part."""
    text = locust_options(environment).arm_hosts
    return parse_arm_hosts(text) if text else {}
