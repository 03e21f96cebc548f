"""What one run is asked to do: the plan the CLI builds from its flags and the planners
build from their own."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zerohop.core.percentile_choice import DEFAULT_PERCENTILES_TEXT
from zerohop.loadgen.run_settings import CLASS_NAMES as CLASS_NAMES  # the planners' choices
from zerohop.loadgen.run_settings import RunSettings
from zerohop.loadgen.run_settings import parse_duration as parse_duration
from zerohop.workloads.errors import WorkloadError
from zerohop.workloads.kind_registry import workload_kind, workload_kinds
from zerohop.workloads.schema.load_spec import ClosedLoad


@dataclass
class RunPlan:
    host: str | None
    api: str
    workloads: list[Path]
    classes: list[str]
    users: int  # Locust's -u
    rate: float | None
    duration_s: float
    telemetry: str
    slo: dict[str, float]
    name: str
    workers: int
    results_dir: Path
    seed: int
    sim_args: list[str] = field(default_factory=list)
    model: str = ""
    report: bool = True
    microbench: str = "auto"
    tokenizer: Path | None = None  # a local tokenizer.json (or its folder) sizing prompts
    # True: `users` is `users_for` the files, each closed workload running its own
    # `users`; False (`--users N`, a sweep's point): `users` goes by weight over them all
    users_from_files: bool = False
    # an interleaved comparison: {arm: base URL}; each request goes to one, at random
    arm_hosts: dict[str, str] = field(default_factory=dict)
    # Locust plugin files loaded beside the shipped user classes (their own event hooks)
    locustfiles: list[Path] = field(default_factory=list)
    requests: int | None = None  # stop after this many requests (--requests)
    max_concurrency: int | None = None  # open-loop arrivals wait for one of N slots
    # the interference probe (`loadgen/probe.py`): req/s (0: none), its request's sizes
    # and the idle phase it runs alone before the load (Locust's -t adds it)
    probe_rate: float = 0.0
    probe_prompt_tokens: int = 16
    probe_output_tokens: int = 4
    probe_idle_s: float = 0.0
    answer_probe: bool = False  # the answer probe (`loadgen/answer_probe.py`)
    # the results block's percentiles (`--percentiles`, validated): the manifest's
    # `config.percentiles` carries them to whatever analyses the run
    percentiles: str = DEFAULT_PERCENTILES_TEXT
    stop_when_saturated: bool = False  # end the load on the live saturation verdict
    # `zerohop run`'s settings as given (None in a plan a planner built): plan.json and
    # the manifest record each one the fields above do not (a new setting arrives so)
    settings: RunSettings | None = None


def manifest_config(plan: RunPlan) -> dict[str, str | None]:
    """The plan as the manifest's `config` records it: each value as text, an unset one
    (no --host: the embedded target, whose URL is the manifest's `target.url`) as null,
    not the string "None"."""
    return {k: None if v is None else str(v) for k, v in _values(plan).items()}


def plan_document(plan: RunPlan) -> dict[str, Any]:
    """The plan as JSON values (paths as text): what `plan.json` holds, before redaction.
    The Locust process reads its settings back from it by their names
    (`loadgen.options.settings_from_plan`)."""
    return {k: _json_value(v) for k, v in _values(plan).items()}


def _values(plan: RunPlan) -> dict[str, Any]:
    """The settings as given, overlaid by the plan's own fields (its worked-out load,
    time and SLOs win over the text they were worked out from)."""
    own = {k: v for k, v in vars(plan).items() if k != "settings"}
    given = dataclasses.asdict(plan.settings) if plan.settings is not None else {}
    return {**given, **own}


def _json_value(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, list | tuple):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    return value


def classes_for(specs: list[Any]) -> list[str]:
    """The user classes that run the given workload specs: naming workload files runs
    those workloads, not every shipped one beside them."""
    return list(dict.fromkeys(workload_kind(spec.kind).user_class for spec in specs))


def users_for(specs: Sequence[Any], classes: Sequence[str]) -> int:
    """Locust's `-u` for a run whose workload files set the load: each closed-loop
    workload's own `users` (Locust spawns them as its `fixed_count`), and one user for
    each open-loop or trace workload (a slot; its dispatcher sends). The workloads are
    those the run runs: the files' (of the `classes`' kinds, when classes are named) and
    the shipped default of each class no file names (no classes: the default run set)."""
    kinds = [k.name for k in workload_kinds() if k.user_class in classes] if classes else None
    running = [s for s in specs if kinds is None or s.kind in kinds]
    in_files = {s.kind for s in specs}
    run_set = [k.name for k in workload_kinds() if k.runs_by_default] if kinds is None else kinds
    defaults = [k for k in run_set if k not in in_files]
    return sum(_users_of(s) for s in running) + sum(_default_users(k) for k in defaults)


def _users_of(spec: Any) -> int:
    return spec.load.users if isinstance(spec.load, ClosedLoad) else 1


def _default_users(kind: str) -> int:
    from zerohop.workloads.inputs import default_workload

    try:
        return _users_of(default_workload(kind, workload_kind(kind).default_file))
    except WorkloadError:  # a default that cannot load is left out at start: a spare slot
        return 1
