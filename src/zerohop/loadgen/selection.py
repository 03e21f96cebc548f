"""Which workloads a run runs, decided once, before any load, by the master.

A workload the user asked for (named in a `--workload` file, or its user class named on
the command line) must run: if it cannot (its trace is missing, it names a model or an
adapter the target does not serve, it takes adapters from a target that has none) the
run refuses at start with one line saying what the target has (exit 2). A shipped
default that cannot run here is left out, and the run says so on the console and in the
manifest. The master (or the local runner) decides; its decision travels to the workers
with Locust's spawn message (`zh_selection`), so master and workers never disagree
about what runs (a worker deciding on its own once ran a workload the master had left
out, and died in test_start).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from zerohop.loadgen.target_models import TargetModels, short_list
from zerohop.workloads.spec import WorkloadError


@dataclass
class Selection:
    """The decision: classes to run (in order), defaults left out and why, and the
    adapters resolved from the target for mixes that take them from it."""

    run: list[str]
    left_out: dict[str, str] = field(default_factory=dict)
    adapters: dict[str, list[str]] = field(default_factory=dict)
    target: str = ""

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Selection:
        data = json.loads(text)
        return cls(run=list(data["run"]), left_out=dict(data.get("left_out", {})),
                   adapters={k: list(v) for k, v in data.get("adapters", {}).items()},
                   target=str(data.get("target", "")))

    def notes(self) -> list[str]:
        """One console line per workload left out."""
        return [f"zerohop: {name} left out: {why}" for name, why in self.left_out.items()]


class _LeaveOut(Exception):
    """A default workload that cannot run here (message: why)."""


def select_workloads(candidates: Sequence[tuple[str, Any]], *, asked: Collection[str],
                     target: TargetModels | None, model_flag: str = "") -> Selection:
    """Decide for each (class name, spec) pair; the spec may be a function that loads
    it (a shipped file whose trace is missing fails to load: WorkloadError). `asked`:
    the class names the user asked for. Raises WorkloadError (one line) for an asked
    workload that cannot run, or when nothing at all can."""
    from zerohop.loadgen.workload_binding import check_inputs

    selection = Selection(run=[], target=target.describe() if target is not None else "")
    for name, item in candidates:
        try:
            try:
                spec = item() if callable(item) else item
                check_inputs(spec)
            except WorkloadError as exc:
                raise _LeaveOut(str(exc)) from None
            _check_models(spec, target, model_flag)
            adapters = resolve_target_adapters(spec, target, model_flag)
        except _LeaveOut as why:
            if name in asked:
                raise WorkloadError(f"{name}: {why}") from None
            selection.left_out[name] = str(why)
            continue
        if adapters is not None:
            selection.adapters[name] = adapters
        selection.run.append(name)
    if not selection.run:
        reasons = "; ".join(f"{k}: {v}" for k, v in selection.left_out.items())
        raise WorkloadError(f"no workload can run against this target ({reasons})")
    return selection


def _check_models(spec: Any, target: TargetModels | None, model_flag: str) -> None:
    """Models and adapters the workload names must be served (refused whether asked
    for or not: a workload that names them is the user's own)."""
    if target is None:
        return  # the target lists nothing: only trying will tell
    named = [("model", spec.model or model_flag)] if (spec.model or model_flag) else []
    policy = getattr(spec, "policy", None)
    fallback = getattr(policy, "fallback", None) if policy is not None else None
    for step in getattr(fallback, "chain", None) or []:
        named.append(("fallback model", step.model))
    adapters = getattr(spec, "adapters", None)
    if adapters is not None and not adapters.from_target:
        named.extend(("adapter", a) for a in adapters.resolved_names())
    missing = [(what, name) for what, name in named if name not in target.ids]
    if missing:
        kinds = sorted({what for what, _ in missing})
        shown = short_list([n for _, n in missing])
        raise WorkloadError(
            f"workload '{spec.name}' asks for {' and '.join(kinds)}s the target does not "
            f"serve: {shown}; the target has: {target.describe()}")


def resolve_target_adapters(spec: Any, target: TargetModels | None,
                            model_flag: str = "") -> list[str] | None:
    """A `from_target` mix's adapters: the target's adapters of the base model the mix
    asks for (its `model`, `--model`, or the target's first base). None for any other
    workload."""
    adapters = getattr(spec, "adapters", None)
    if adapters is None or not adapters.from_target:
        return None
    if target is None:
        raise _LeaveOut("it takes its adapters from the target's /v1/models, and the "
                        "target lists no models")
    base = spec.model or model_flag or target.default_base()
    found = list(target.adapters_of(base)) if base else []
    if not found:
        raise _LeaveOut(f"the target serves no LoRA adapters on {base or 'any model'} "
                        f"(/v1/models lists: {target.describe()})")
    return found[: adapters.max_count] if adapters.max_count else found


def with_resolved_adapters(spec: Any, adapters: list[str] | None) -> Any:
    """The spec with its `from_target` adapters replaced by the resolved names (a
    derived spec; the validated one is not changed)."""
    if not adapters or getattr(spec, "adapters", None) is None or not spec.adapters.from_target:
        return spec
    from zerohop.workloads.adapters import AdapterSet

    return spec.model_copy(update={"adapters": AdapterSet(names=list(adapters))})


# --- inside Locust --------------------------------------------------------------------
def llm_user_classes(environment: Any) -> list[type]:
    from zerohop.loadgen.users import LLMUser

    return [c for c in environment.user_classes
            if isinstance(c, type) and issubclass(c, LLMUser)]


def decide(environment: Any) -> Selection:
    """The master's (or local runner's) decision for this run's user classes."""
    from zerohop.client.protocols import api_key_from_env
    from zerohop.loadgen import options as opt
    from zerohop.loadgen.target_models import fetch_target_models
    from zerohop.loadgen.workload_binding import load_workloads, spec_for

    classes = llm_user_classes(environment)
    kinds_in_files = {s.kind for s in load_workloads(opt.option(environment, "zh_workload"))}
    parsed = getattr(environment, "parsed_options", None)
    named = set(getattr(parsed, "user_classes", None) or [])
    asked = {c.__name__ for c in classes
             if c.workload_kind in kinds_in_files or c.__name__ in named}  # type: ignore[attr-defined]
    api = opt.option(environment, "zh_api")
    target = fetch_target_models(environment.host, api=api, api_key=api_key_from_env(api))
    candidates = [(c.__name__, lambda c=c: spec_for(environment, c)) for c in classes]
    return select_workloads(candidates, asked=asked, target=target,
                            model_flag=opt.option(environment, "zh_model") or "")


def publish(environment: Any, rt: Any, selection: Selection) -> None:
    """Keep the decision here and hand it to the workers (Locust sends parsed options
    with every spawn message)."""
    rt.extras["selection"] = selection
    parsed = getattr(environment, "parsed_options", None)
    if parsed is not None:
        parsed.zh_selection = selection.to_json()


def received(environment: Any, rt: Any) -> Selection | None:
    """The decision this process runs by: its own, or the master's (on a worker)."""
    selection = rt.extras.get("selection")
    if selection is None:
        text = getattr(getattr(environment, "parsed_options", None), "zh_selection", "")
        if text:
            selection = rt.extras["selection"] = Selection.from_json(text)
    return selection


def apply(environment: Any, selection: Selection) -> None:
    """Drop the user classes the decision leaves out (Locust then spawns none of them,
    and zerohop plans, calibrates and dispatches none of them)."""
    keep = set(selection.run)
    for user_class in llm_user_classes(environment):
        if user_class.__name__ not in keep:
            environment.user_classes.remove(user_class)


def fitted_spec(environment: Any, user_class: type, spec: Any) -> Any:
    """`spec` with the adapters the decision resolved from the target (or, with no
    decision, as library use without the hooks has, resolved now)."""
    adapters = getattr(spec, "adapters", None)
    if adapters is None or not adapters.from_target:
        return spec
    rt = getattr(environment, "zerohop_runtime", None)
    selection = received(environment, rt) if rt is not None else None
    if selection is not None and user_class.__name__ in selection.adapters:
        return with_resolved_adapters(spec, selection.adapters[user_class.__name__])
    from zerohop.loadgen import options as opt
    from zerohop.loadgen.target_models import fetch_target_models

    try:
        resolved = resolve_target_adapters(spec, fetch_target_models(environment.host),
                                           opt.option(environment, "zh_model") or "")
    except _LeaveOut as why:
        raise WorkloadError(f"{user_class.__name__}: {why}") from None
    return with_resolved_adapters(spec, resolved)


# --- on the console of `zerohop run` ----------------------------------------------------
SELECTION_WAIT_S = 60.0


def announce_selection(poll: Callable[[], int | None], run_dir: Path) -> None:
    """Say on the console which default workloads the run left out, and why, as soon
    as Locust's master has decided (`_record_selection` in hooks writes it to the
    manifest); `poll` is the Locust process's, so a Locust that exits early ends the
    wait."""
    import time

    import click

    from zerohop.storage import run_folder as results

    deadline = time.monotonic() + SELECTION_WAIT_S
    while poll() is None and time.monotonic() < deadline:
        try:
            decision = results.read_manifest(run_dir).get("workload_selection")
        except ValueError:
            decision = None
        if decision is not None:
            for name, why in (decision.get("left_out") or {}).items():
                click.echo(f"zerohop: {name} left out: {why}", err=True)
            return
        time.sleep(0.1)
