"""One Locust user class per workload: several workloads of one kind all run, each under
its own name, with the weight its workload file gives it.

The unit tests use plain classes for the locustfiles' ones: importing Locust here would
monkey-patch the whole test process. Locust itself picks the classes in the runs below."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest

from tests.main_job.test_run_command import zerohop
from zerohop.loadgen.selection import (
    plan_candidates,
    select_workloads,
    users_by_weight,
    workload_class,
)
from zerohop.workloads.errors import WorkloadError
from zerohop.workloads.inputs import load_workloads

TWO_FLOODS = """
workloads:
  - kind: short_query_flood
    name: light
    weight: 1
    input_tokens: 16
    max_tokens: 4
    load: {kind: closed, think_time_s: 0.05}
  - kind: short_query_flood
    name: heavy
    weight: 5
    input_tokens: 16
    max_tokens: 4
    load: {kind: closed, think_time_s: 0.05}
"""


class ShortQueryFlood:
    """Stands for the locustfile's class of the kind, with a weight of its own."""

    workload_kind = "short_query_flood"
    default_workload_file = "short_query_flood.yaml"
    weight = 4
    fixed_count = 0  # Locust's User: no fixed count, users go by weight


class LoRAMix:
    workload_kind = "lora_mix"
    default_workload_file = "lora_mix.yaml"
    weight = 2


def _file(tmp_path: Path, text: str, name: str = "w.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _classes(templates: tuple[type, ...], *files: Path) -> list[Any]:
    found = plan_candidates(templates, load_workloads(files), named=())
    return [workload_class(c.template, c.load(), c.name) for c in found]


@pytest.mark.unit
def test_each_workload_of_a_kind_gets_its_own_class_spec_and_yaml_weight(
        tmp_path: Path) -> None:
    classes = _classes((ShortQueryFlood,), _file(tmp_path, TWO_FLOODS))
    assert [c.__name__ for c in classes] == ["light", "heavy"]
    assert [c.weight for c in classes] == [1, 5]  # the file's, not the class's 4
    assert [c.workload_spec.name for c in classes] == ["light", "heavy"]
    assert all(issubclass(c, ShortQueryFlood) for c in classes)


@pytest.mark.unit
def test_a_workload_without_weight_keeps_its_class_weight(tmp_path: Path) -> None:
    wl = _file(tmp_path, "kind: short_query_flood\nname: plain\n")
    assert [(c.__name__, c.weight) for c in _classes((ShortQueryFlood,), wl)] == [("plain", 4)]


class TraceReplay:
    """Stands for loadtests/trace_replay.py's class: one user holds the dispatcher's slot."""

    workload_kind = "trace_replay"
    default_workload_file = "trace_replay_azure_conv.yaml"
    weight = 1
    fixed_count = 1


CLOSED_AND_OPEN = """
workloads:
  - {kind: short_query_flood, name: one, load: {kind: closed, users: 1}}
  - {kind: short_query_flood, name: three, weight: 2, load: {kind: closed, users: 3}}
  - {kind: short_query_flood, name: arrivals, load: {kind: open, rate_rps: 5}}
"""


@pytest.mark.unit
def test_a_closed_workload_runs_its_files_users_as_locusts_fixed_count(tmp_path: Path) -> None:
    """Locust spawns a class's `fixed_count` users before it spreads the rest of -u by
    weight: a closed workload's `users` is that count; an open one's users only hold a
    slot, so it keeps the template's (none) and goes by weight."""
    wl = _file(tmp_path, CLOSED_AND_OPEN)
    classes = _classes((ShortQueryFlood,), wl)
    assert [(c.__name__, c.fixed_count) for c in classes] == [
        ("one", 1), ("three", 3), ("arrivals", 0)]
    assert [c.weight for c in classes] == [4, 2, 4]  # weights as before
    (replay,) = _classes((TraceReplay,))  # the shipped trace_replay default: a trace load
    assert replay.fixed_count == 1  # the template's


@pytest.mark.unit
def test_users_by_weight_leaves_every_class_to_locusts_weights(tmp_path: Path) -> None:
    """`zerohop run --users N` (`--users-by-weight`): N users over all workloads by weight,
    the files' closed-loop `users` overridden."""
    found = plan_candidates((ShortQueryFlood,), load_workloads([_file(tmp_path, CLOSED_AND_OPEN)]),
                            named=())
    classes = [workload_class(c.template, c.load(), c.name, by_weight=True) for c in found]
    assert [(c.__name__, c.fixed_count) for c in classes] == [
        ("one", 0), ("three", 0), ("arrivals", 0)]
    # the trace replay's template holds one user for its dispatcher; by weight, none: with
    # `--users 1` that user went to the trace, and the closed workloads sent nothing
    (replay,) = plan_candidates((TraceReplay,), [], named=())
    assert workload_class(replay.template, replay.load(), replay.name,
                          by_weight=True).fixed_count == 0


@pytest.mark.unit
def test_users_on_the_command_line_make_every_workload_closed_loop() -> None:
    """`--users N` (and a layer comparison's one user) is closed loop: an open-loop or
    trace workload is sent by its users, not by its file's clock; without the flag, the
    files' loads stand."""
    from zerohop.loadgen.workload_binding import _with_load_override

    specs = load_workloads([Path(__file__).resolve().parents[2] / "workloads" / "all.yaml"])
    assert {s.load.kind for s in specs} == {"open", "closed", "trace"}
    classes = [SimpleNamespace(weight=s.weight, workload_kind=s.kind, spec=s) for s in specs]
    for by_weight, kinds in ((True, {"closed"}), (False, {"open", "closed", "trace"})):
        environment = SimpleNamespace(user_classes=classes, parsed_options=SimpleNamespace(
            zh_rate=0.0, zh_users_by_weight=by_weight))
        loads = [_with_load_override(environment, c, c.spec).load for c in classes]
        assert {load.kind for load in loads} == kinds


@pytest.mark.unit
def test_the_override_is_the_flag_or_a_rate_that_replaces_the_load_sections() -> None:
    def environment(**options: Any) -> SimpleNamespace:
        return SimpleNamespace(parsed_options=SimpleNamespace(**options))

    assert users_by_weight(SimpleNamespace()) is False  # library use: the files decide
    assert users_by_weight(environment(zh_users_by_weight=False, zh_rate=0.0)) is False
    assert users_by_weight(environment(zh_users_by_weight=True, zh_rate=0.0)) is True
    assert users_by_weight(environment(zh_users_by_weight=False, zh_rate=20.0)) is True


@pytest.mark.unit
def test_a_class_no_file_names_offers_its_default_under_its_own_name(tmp_path: Path) -> None:
    wl = _file(tmp_path, TWO_FLOODS)
    found = plan_candidates((ShortQueryFlood, LoRAMix), load_workloads([wl]), named=())
    assert [(c.name, c.asked) for c in found] == [
        ("light", True), ("heavy", True), ("LoRAMix", False)]
    assert found[2].load().name == "lora_mix"  # the shipped lora_mix.yaml
    named = plan_candidates((ShortQueryFlood, LoRAMix), [], named={"LoRAMix"})
    assert [(c.name, c.asked) for c in named] == [("ShortQueryFlood", False), ("LoRAMix", True)]
    # `--only LoRAMix` with a file of floods: the floods have no class, so do not run
    assert [c.name for c in plan_candidates((LoRAMix,), load_workloads([wl]), named=())
            ] == ["LoRAMix"]


class Conversation:
    """Stands for loadtests/conversation.py's class: not in the default run set."""

    workload_kind = "conversation"
    default_workload_file = "conversation.yaml"
    runs_by_default = False
    weight = 1


@pytest.mark.unit
def test_a_class_not_run_by_default_runs_only_when_a_file_or_the_command_names_it(
        tmp_path: Path) -> None:
    templates = (ShortQueryFlood, Conversation)
    assert [c.name for c in plan_candidates(templates, [], named=())] == ["ShortQueryFlood"]
    named = plan_candidates(templates, [], named={"Conversation"})
    assert [(c.name, c.asked) for c in named] == [("ShortQueryFlood", False),
                                                   ("Conversation", True)]
    assert named[1].load().kind == "conversation"  # the shipped example file
    wl = _file(tmp_path, "kind: conversation\nname: chats\n")
    assert [(c.name, c.asked) for c in plan_candidates(templates, load_workloads([wl]),
                                                       named=())] == [
        ("ShortQueryFlood", False), ("chats", True)]


@pytest.mark.unit
def test_the_shipped_new_kinds_are_not_in_the_default_run_set() -> None:
    from zerohop.workloads.kind_registry import workload_kind

    for kind in ("conversation", "shared_prefix", "agent"):
        assert not workload_kind(kind).runs_by_default
        assert workload_kind(kind).default_file == f"{kind}.yaml"


@pytest.mark.integration  # in a child: importing Locust patches this process's sockets
def test_a_user_class_takes_its_default_file_and_run_set_from_the_tables() -> None:
    import json
    import subprocess
    import sys

    probe = (
        "import json\n"
        "from zerohop.loadgen.users import LLMUser\n"
        "out = {}\n"
        "for kind in ('conversation', 'shared_prefix', 'agent', 'short_query_flood'):\n"
        "    user = type('Probe_' + kind, (LLMUser,), {'workload_kind': kind, 'abstract': True})\n"
        "    out[kind] = [user.runs_by_default, user.default_workload_file]\n"
        "print(json.dumps(out))\n"
    )
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    got = json.loads(res.stdout.strip().splitlines()[-1])
    for kind in ("conversation", "shared_prefix", "agent"):
        assert got[kind] == [False, f"{kind}.yaml"], kind
    assert got["short_query_flood"] == [True, "short_query_flood.yaml"]


class Agent:
    """Stands for loadtests/agent.py's class: not in the default run set either."""

    workload_kind = "agent"
    default_workload_file = "agent.yaml"
    runs_by_default = False
    weight = 1


@pytest.mark.unit
def test_the_agent_class_runs_when_named_and_needs_an_api_with_tools(tmp_path: Path) -> None:
    templates = (ShortQueryFlood, Agent)
    assert [c.name for c in plan_candidates(templates, [], named=())] == ["ShortQueryFlood"]
    named = plan_candidates(templates, [], named={"Agent"})
    assert [(c.name, c.asked) for c in named] == [("ShortQueryFlood", False), ("Agent", True)]
    assert named[1].load().kind == "agent"  # the shipped workloads/agent.yaml
    pairs = [(c.name, c.load) for c in named]
    assert select_workloads(pairs, asked={"Agent"}, target=None, api="anthropic").run == [
        "ShortQueryFlood", "Agent"]
    with pytest.raises(WorkloadError) as refused:
        select_workloads(pairs, asked={"Agent"}, target=None, api="openai-completions")
    assert str(refused.value) == (
        "Agent: workload 'agent' is an agent loop and openai-completions has no tools: "
        "use --api openai-chat or anthropic or openai-responses")
    # a workload that names its own API with tools runs whatever the run's
    own = _file(tmp_path, "kind: agent\nname: loops\napi: anthropic\n")
    found = plan_candidates(templates, load_workloads([own]), named=())
    assert select_workloads([(c.name, c.load) for c in found], asked={"loops"}, target=None,
                            api="openai-completions").run == ["ShortQueryFlood", "loops"]


@pytest.mark.unit
def test_workload_names_are_unique_over_files_and_classes(tmp_path: Path) -> None:
    a = _file(tmp_path, "kind: short_query_flood\nname: same\n", "a.yaml")
    b = _file(tmp_path, "kind: lora_mix\nname: same\nadapters: [x]\n", "b.yaml")
    with pytest.raises(WorkloadError, match=r"b\.yaml: duplicate workload name 'same'"):
        load_workloads([a, b])
    clash = _file(tmp_path, "kind: short_query_flood\nname: LoRAMix\n", "c.yaml")
    with pytest.raises(WorkloadError, match="'LoRAMix' is also the name of a user class"):
        plan_candidates((ShortQueryFlood, LoRAMix), load_workloads([clash]), named=())


@pytest.mark.integration  # runs `zerohop run` (Locust, the embedded target) as a child
@pytest.mark.parametrize("workers", [0, 2])
def test_two_workloads_of_one_kind_both_run_by_their_weights(workers: int,
                                                            tmp_path: Path) -> None:
    """6 users over weights 1 and 5: one runs `light`, five run `heavy` (with workers,
    each worker builds the same classes as the master that dispatches them)."""
    wl = _file(tmp_path, TWO_FLOODS)
    res = zerohop("run", "--workload", str(wl), "--users", "6", "--duration", "8s",
                  "--workers", str(workers), "--no-report", "--results-dir",
                  str(tmp_path / "r"))
    assert res.returncode == 0, res.stderr[-3000:]
    (run,) = [p for p in (tmp_path / "r").iterdir() if p.is_dir()]
    df = pd.read_parquet(run / "requests.parquet")
    counts = df.groupby("workload").size().to_dict()
    assert set(counts) == {"light", "heavy"}, counts
    assert counts["heavy"] >= 2.5 * counts["light"], counts
    assert (df.outcome == "ok").all(), df.outcome.value_counts()
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["workload_selection"]["run"] == ["light", "heavy"]
    assert manifest["status"] == "completed"


ONE_AND_THREE = """
workloads:
  - kind: short_query_flood
    name: one
    input_tokens: 16
    max_tokens: 24
    load: {kind: closed, users: 1}
  - kind: short_query_flood
    name: three
    input_tokens: 16
    max_tokens: 24
    load: {kind: closed, users: 3}
"""


def _max_in_flight(frame: pd.DataFrame) -> dict[str, int]:
    """Each workload's most requests in flight at once, from its records' send and end
    times (an end before a send at the same instant: a closed loop's next request)."""
    peaks = {}
    for name, rows in frame.groupby("workload"):
        ends = rows.end_ts.fillna(float("inf"))  # still in flight when the run ended
        events = sorted([(t, 1) for t in rows.sent_ts] + [(t, -1) for t in ends])
        level = peak = 0
        for _, step in events:
            level += step
            peak = max(peak, level)
        peaks[str(name)] = peak
    return peaks


def _users_run(tmp_path: Path, *extra: str) -> dict[str, int]:
    wl = _file(tmp_path, ONE_AND_THREE)
    results = tmp_path / "r"
    res = zerohop("run", "--workload", str(wl), "--duration", "6s", "--telemetry", "none",
                  "--microbench", "off", "--no-report", "--results-dir", str(results), *extra)
    assert res.returncode == 0, res.stderr[-3000:]
    (run,) = [p for p in results.iterdir() if p.is_dir()]
    frame = pd.read_parquet(run / "requests.parquet")
    assert set(frame.workload) == {"one", "three"}, frame.workload.value_counts()
    return _max_in_flight(frame)


@pytest.mark.integration  # runs `zerohop run` (Locust, the embedded target) as a child
@pytest.mark.parametrize("workers", [0, 2])
def test_a_closed_workload_runs_the_users_its_file_gives(workers: int, tmp_path: Path) -> None:
    """users: 1 and users: 3 are 1 and 3 requests in flight at most, the 3 reached (with
    workers too: Locust counts a fixed count over all of them)."""
    peaks = _users_run(tmp_path, "--workers", str(workers))
    assert peaks["one"] == 1, peaks
    assert peaks["three"] == 3, peaks


@pytest.mark.integration  # runs `zerohop run` (Locust, the embedded target) as a child
def test_users_on_the_command_line_override_the_files(tmp_path: Path) -> None:
    """--users 8 over two workloads of equal weight: 4 users each, the files' 1 and 3
    overridden."""
    peaks = _users_run(tmp_path, "--users", "8")
    assert 1 < peaks["one"] <= 4, peaks
    assert peaks["three"] <= 4, peaks


@pytest.mark.unit
def test_rate_is_the_total_offered_over_every_workload_trace_replay_included() -> None:
    """`--rate 20` on the four default workloads: each gets its weight's share of 20, and
    the trace replay too (it offered its own ~17 req/s on top: 36 in all), its clock
    scaled so that its window holds its share's arrivals. Recounted here from the specs
    the run's workloads get and the trace window that replay sends."""
    from collections import Counter

    from zerohop.loadgen.workload_binding import _with_load_override
    from zerohop.workloads.timing.traces import read_trace, replay_window

    specs = load_workloads([Path(__file__).resolve().parents[2] / "workloads" / "all.yaml"])
    classes = [SimpleNamespace(weight=s.weight, workload_kind=s.kind, spec=s) for s in specs]
    environment = SimpleNamespace(parsed_options=SimpleNamespace(zh_rate=20.0),
                                  user_classes=classes)
    total_weight = sum(s.weight for s in specs)
    offered = 0.0
    for user_class in classes:
        spec = _with_load_override(environment, user_class, user_class.spec)
        share = 20.0 * user_class.weight / total_weight
        if spec.kind == "trace_replay":
            rows = read_trace(spec.trace, spec.resolved_format)
            window = replay_window(rows, speed=spec.speed, duration_s=spec.duration_s)
            # arrivals that share a timestamp enter together: off by at most one such group
            tie = max(Counter(r.offset_s for r in rows).values())
            assert abs(len(window) - share * spec.duration_s) <= tie
            rate = len(window) / spec.duration_s
        else:
            assert (spec.load.kind, spec.load.rate_rps) == ("open", pytest.approx(share))
            rate = spec.load.rate_rps
        offered += rate
    assert offered == pytest.approx(20.0, rel=0.05)


@pytest.mark.unit
@pytest.mark.parametrize("options", [{"zh_requests": 200}, {"run_time": 10}])
def test_a_trace_replay_offers_its_share_over_what_the_run_plays(options: dict[str, Any]
                                                                 ) -> None:
    """A run shorter than the trace's window plays its first seconds, which are not
    its mean (a `--rate 20` run of 15 s once gave the trace 1.2 of its 2.5 req/s):
    `--requests 200` at 20 req/s is 10 s of arrivals, as `-t 10s` is, and those 10 s
    hold the trace's share of them."""
    from collections import Counter

    from zerohop.loadgen.workload_binding import _with_load_override
    from zerohop.workloads.timing.traces import read_trace, replay_window

    shipped = Path(__file__).resolve().parents[2] / "workloads"
    specs = load_workloads([shipped / f"{name}.yaml" for name in (  # the default run's
        "short_query_flood", "long_context", "lora_mix", "trace_replay_azure_conv")])
    (trace,) = [s for s in specs if s.kind == "trace_replay"]
    classes = [SimpleNamespace(weight=s.weight, workload_kind=s.kind) for s in specs]
    environment = SimpleNamespace(user_classes=classes, parsed_options=SimpleNamespace(
        zh_rate=20.0, **options))
    mine = SimpleNamespace(weight=trace.weight, workload_kind=trace.kind)
    spec = _with_load_override(environment, mine, trace)
    share = 20.0 * trace.weight / sum(s.weight for s in specs)
    rows = read_trace(spec.trace, spec.resolved_format)
    played = replay_window(rows, speed=spec.speed, duration_s=10.0)
    tie = max(Counter(r.offset_s for r in rows).values())
    assert abs(len(played) - share * 10.0) <= tie, (len(played), share)
