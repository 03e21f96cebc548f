"""Which workloads a run runs, decided once, before any load, by the master.

A workload the user asked for (named in a `--workload` file, or its user class named on
the command line) must run: if it cannot (its trace is missing, it names a model or an
adapter the target does not serve, it takes adapters from a target that has none, it is
an agent loop on an API without tools) the run refuses at start with one line saying
why (exit 2). A shipped
default that cannot run here is left out, and the run says so on the console and in the
manifest. The master (or the local runner) decides; its decision travels to the workers
with Locust's spawn message (`options.SELECTION`), so master and workers never disagree
about what runs (a worker deciding on its own once ran a workload the master had left
out, and died in test_start).

Every workload that runs gets its own Locust user class (`workload_class`, a subclass
of the locustfile's class of its kind): two workloads of one kind both run, each with
its own spec, weight and name in the records. A closed-loop workload's class has Locust's
`fixed_count` set to its file's `users`, so Locust spawns exactly that many of it (over
all workers together) before it spreads the rest of `-u` by weight; with
`--users-by-weight` (`zerohop run --users N`) or `--rate` every class goes by
weight instead.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from zerohop.core.apis import DEFAULT_API
from zerohop.loadgen.target_models import TargetModels, short_list
from zerohop.workloads.errors import WorkloadError
from zerohop.workloads.inputs import check_inputs, default_workload, load_workloads
from zerohop.workloads.schema.agent_spec import tools_refusal
from zerohop.workloads.schema.image_spec import image_refusal
from zerohop.workloads.schema.load_spec import ClosedLoad
from zerohop.workloads.schema.pooling_specs import pooling_refusal
from zerohop.workloads.schema.workload_base import structured_refusal

T = TypeVar("T")


@dataclass
class Selection:
    """The decision: the user classes to run, in order (a --workload file's workloads by
    their names, a locustfile class's default by the class's name), defaults left out
    and why, and the adapters resolved from the target for mixes that take them from it."""

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
                     target: TargetModels | None, model_flag: str = "",
                     api: str = DEFAULT_API) -> Selection:
    """Decide for each (class name, spec) pair; the spec may be a function that loads
    it (a shipped file whose trace is missing fails to load: WorkloadError). `asked`:
    the class names the user asked for; `api`: the run's. Raises WorkloadError (one
    line) for an asked workload that cannot run, or when nothing at all can."""
    selection = Selection(run=[], target=target.describe() if target is not None else "")
    for name, item in candidates:
        try:
            try:
                spec = item() if callable(item) else item
                check_inputs(spec)
            except WorkloadError as exc:
                raise _LeaveOut(str(exc)) from None
            refusal = (tools_refusal(spec, api) or structured_refusal(spec, api)
                       or image_refusal(spec, api)
                       or pooling_refusal(spec, api))
            if refusal is not None:
                raise _LeaveOut(refusal)
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
    from zerohop.workloads.schema.lora_selection import AdapterSet

    return spec.model_copy(update={"adapters": AdapterSet(names=list(adapters))})


# --- inside Locust --------------------------------------------------------------------
def llm_user_classes(environment: Any) -> list[type]:
    """The run's workload classes: the `users.LLMUser` subclasses, known by the workload
    kind each declares (a Locust class of the user's own has none)."""
    return [c for c in environment.user_classes
            if isinstance(c, type) and bool(getattr(c, "workload_kind", None))]


@dataclass(frozen=True)
class Candidate:
    """A workload that may run: the name of the user class that would run it, the
    locustfile's class of its kind (`template`), its spec (or a function that loads it:
    a shipped default), and whether the user asked for it."""

    name: str
    template: type
    spec: Any
    asked: bool

    def load(self) -> Any:
        return self.spec() if callable(self.spec) else self.spec


def candidates(environment: Any) -> list[Candidate]:
    """This process's candidates (`plan_candidates` over the locustfiles' classes, the
    --workload files and the classes named on the command line), derived once per
    process: `apply` then replaces those classes, and master and workers, deriving from
    the same options, name the same classes."""
    rt = getattr(environment, "zerohop_runtime", None)
    cached = rt.extras.get("candidates") if rt is not None else None
    if cached is not None:
        return list(cached)
    from zerohop.loadgen import options as opt

    parsed = getattr(environment, "parsed_options", None)
    found = plan_candidates(llm_user_classes(environment),
                            load_workloads(opt.run_settings(environment).workloads),
                            named=set(getattr(parsed, "user_classes", None) or []))
    if rt is not None:
        rt.extras["candidates"] = found
    return list(found)


def plan_candidates(templates: Sequence[type], in_files: Sequence[Any], *,
                    named: Collection[str]) -> list[Candidate]:
    """One candidate per workload in the --workload files (`in_files`), each under its own
    name and asked for, given to the first locustfile class of its kind; a class whose
    kind no file names offers its default workload under the class's own name, asked
    for when `named` on the command line. A class that does not run by default
    (`runs_by_default = False`: conversation, shared_prefix, agent) offers its default only
    when named. A file's workload whose kind no class runs (`--only` left it out) is no
    candidate."""
    found: list[Candidate] = []
    kinds_taken: set[str] = set()
    for template in templates:
        kind = template.workload_kind  # type: ignore[attr-defined]
        mine = [spec for spec in in_files if spec.kind == kind]
        if not mine and not getattr(template, "runs_by_default", True) \
                and template.__name__ not in named:
            continue
        if not mine:
            found.append(Candidate(
                template.__name__, template,
                lambda t=template: default_workload(t.workload_kind, t.default_workload_file),
                asked=template.__name__ in named))
        elif kind not in kinds_taken:
            found += [Candidate(spec.name, template, spec, asked=True) for spec in mine]
            kinds_taken.add(kind)
    _check_unique_names(found)
    return found


def workload_class(template: type[T], spec: Any, name: str, *,
                   by_weight: bool = False) -> type[T]:
    """The Locust user class that runs the one workload `spec`, called `name`: a subclass
    of the locustfile's class of its kind (`template`), so several workloads of one kind
    run side by side, each with its own spec, weight and records. Its Locust weight is
    the workload file's `weight` when the file gives one, else the template's. A
    closed-loop workload's `fixed_count` is its `load.users` (Locust spawns that many, in
    all, before it spreads the rest of `-u` by weight), unless `by_weight` (the users are
    the command line's, spread by weight, for every class); otherwise `fixed_count` stays
    the template's (an open-loop or trace workload's users only hold a slot)."""
    attrs: dict[str, Any] = {"workload_spec": spec, "__module__": template.__module__,
                             "__qualname__": name}
    if spec.weight is not None:
        attrs["weight"] = spec.weight
    if by_weight:  # every user is the command line's: none held for a trace's dispatcher
        attrs["fixed_count"] = 0
    elif isinstance(getattr(spec, "load", None), ClosedLoad):
        attrs["fixed_count"] = spec.load.users
    return type(name, (template,), attrs)


def users_by_weight(environment: Any) -> bool:
    """Whether `-u` goes by weight over every workload class (`--users-by-weight`, or
    `--rate`, which replaces the files' load sections) rather than each closed
    workload running its file's `users`."""
    from zerohop.loadgen import options as opt

    return opt.locust_options(environment).users_by_weight \
        or (opt.run_settings(environment).rate or 0.0) > 0


def _check_unique_names(found: Sequence[Candidate]) -> None:
    """Locust keys user classes by name: a workload named like another class that runs
    beside it would take its place."""
    seen: set[str] = set()
    for candidate in found:
        if candidate.name in seen:
            raise WorkloadError(
                f"workload name '{candidate.name}' is also the name of a user class that "
                "runs beside it: rename the workload")
        seen.add(candidate.name)


def decide(environment: Any) -> Selection:
    """The master's (or local runner's) decision for this run's workloads."""
    from zerohop.client.protocols import api_key_from_env
    from zerohop.loadgen import options as opt
    from zerohop.loadgen.target_models import fetch_target_models

    found = candidates(environment)
    settings = opt.run_settings(environment)
    api = settings.api
    target = fetch_target_models(environment.host, api=api, api_key=api_key_from_env(api))
    return select_workloads([(c.name, c.load) for c in found],
                            asked={c.name for c in found if c.asked}, target=target,
                            model_flag=settings.model, api=api)


def publish(environment: Any, rt: Any, selection: Selection) -> None:
    """Keep the decision here and hand it to the workers (Locust sends parsed options
    with every spawn message)."""
    from zerohop.loadgen import options as opt

    rt.extras["selection"] = selection
    parsed = getattr(environment, "parsed_options", None)
    if parsed is not None:
        setattr(parsed, opt.SELECTION, selection.to_json())


def received(environment: Any, rt: Any) -> Selection | None:
    """The decision this process runs by: its own, or the master's (on a worker)."""
    from zerohop.loadgen import options as opt

    selection = rt.extras.get("selection")
    if selection is None:
        text = getattr(getattr(environment, "parsed_options", None), opt.SELECTION, "")
        if text:
            selection = rt.extras["selection"] = Selection.from_json(text)
    return selection


def apply(environment: Any, selection: Selection) -> None:
    """Replace the locustfiles' classes by one class per workload the decision runs
    (`workload_class`: its own name, spec, weight and, closed loop, user count). Locust
    then spawns only those, and zerohop plans, calibrates and dispatches only those.
    Calling it again (a worker's next test start) keeps the same classes, whose users
    may be running."""
    rt = getattr(environment, "zerohop_runtime", None)
    made: dict[str, type] = rt.extras.setdefault("workload_classes", {}) if rt else {}
    by_name = {c.name: c for c in candidates(environment)}
    by_weight = users_by_weight(environment)
    for name in selection.run:
        if name in made:
            continue
        if name not in by_name:  # a worker whose files or locustfiles differ from the master's
            raise WorkloadError(f"the run has a workload '{name}' that this process lacks "
                                "(give every process the same --workload files and locustfiles)")
        candidate = by_name[name]
        made[name] = workload_class(candidate.template, candidate.load(), name,
                                    by_weight=by_weight)
    others = [c for c in environment.user_classes if c not in llm_user_classes(environment)]
    environment.user_classes[:] = others + [made[name] for name in selection.run]


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
                                           opt.run_settings(environment).model)
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
