"""`zerohop run`'s settings, declared once (loadgen/run_settings.py): the click command is
generated from the model, Locust's flags of the same name take their flag, help and
choices from it, and the Locust process that `zerohop run` starts reads the run's plan
from the run folder (plan.json, secrets redacted) instead of a second copy of the flags."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import click
import pytest

from zerohop.cli.main_job import plan_from_flags, run_command
from zerohop.core.layout import PLAN_FILE
from zerohop.loadgen import options
from zerohop.loadgen.run_settings import RunSettings, flag_of, setting_fields
from zerohop.runner.locust_process import locust_command, write_plan
from zerohop.runner.plan import RunPlan

pytestmark = pytest.mark.unit

SRC = Path(options.__file__).parents[1]
RUN_FLAGS = {flag.name for _, flag, _ in setting_fields()}
LOCUST_OWN = {"--host"}  # Locust's own option, which `zerohop run`'s --host becomes


def _declared_flags(tree: ast.AST) -> list[tuple[str, int]]:
    """Every flag a module declares as a literal: click.option("--x", ...) and
    parser.add_argument("--x", ...)."""
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("option", "add_argument")):
            found += [(arg.value, node.lineno) for arg in node.args
                      if isinstance(arg, ast.Constant) and isinstance(arg.value, str)
                      and arg.value.startswith("--")]
    return found


# flags of the same spelling that other commands declare with another meaning
OTHER_MEANING = {
    ("cli/locustfile.py", "--only"),  # which locustfile to print
    ("cli/simulate.py", "--workload"),  # one file, required
    ("cli/simulate.py", "--replicas"),  # the modelled fleet's replicas, no layer comparison
    ("microbench/microbench_command.py", "--only"),  # which microbenchmarks
    ("planning/capacity_cli.py", "--slo"),  # required: what the capacity is judged by
    ("planning/sweep_cli.py", "--users"),  # a list of concurrencies, one per point
    ("proxy/proxy_command.py", "--route"),  # the proxy's one policy
    ("proxy/proxy_command.py", "--host"),  # the address it binds
    ("proxy/proxy_command.py", "--max-concurrency"),  # the proxy's own limit
    ("report/report_commands.py", "--seed"),  # the bootstrap's
    ("sim/sim_command.py", "--model"),  # the model the target serves
    ("sim/sim_command.py", "--host"),  # the address it binds
    ("sim/sim_command.py", "--seed"),  # the engine model's
    ("telemetry/exporter.py", "--host"),  # the address it binds
}


def test_no_run_flag_is_declared_outside_the_settings_model() -> None:
    """`zerohop run`, Locust, selfcheck, sweep and simulate take the run's flags from
    the settings model; any other command's flag of the same spelling means another
    thing, and says what."""
    twice = []
    for path in sorted(SRC.rglob("*.py")):
        module = str(path.relative_to(SRC))
        twice += [f"{module}:{line} {flag}"
                  for flag, line in _declared_flags(ast.parse(path.read_text()))
                  if flag in RUN_FLAGS and (module, flag) not in OTHER_MEANING]
    assert twice == [], "declare these in loadgen/run_settings.py only"


def test_the_scan_finds_a_declaration_it_should_refuse() -> None:
    """The scan above is no test if it cannot see a declaration."""
    tree = ast.parse('import click\n@click.option("--tokenizer")\ndef f(): ...\n'
                     'parser.add_argument("--seed", dest="zh_seed")\n')
    assert [flag for flag, _ in _declared_flags(tree)] == ["--tokenizer", "--seed"]


def test_the_subcommands_take_the_run_flags_from_the_model() -> None:
    """The seed's default exists once: each command that takes --seed for a run shows
    the model's."""
    from zerohop.cli.selfcheck import selfcheck_command
    from zerohop.cli.simulate import simulate_command
    from zerohop.planning.sweep_cli import sweep_command

    for command in (run_command, selfcheck_command, sweep_command, simulate_command):
        seed = next(p for p in command.params if p.name == "seed")
        assert (seed.opts, seed.default) == (["--seed"], RunSettings().seed), command.name


def test_the_run_command_is_the_settings_model() -> None:
    params = [p for p in run_command.params if isinstance(p, click.Option)]
    assert [(p.name, p.opts) for p in params] == [
        (name, [flag.name]) for name, flag, _ in setting_fields()]
    for param, (_, flag, default) in zip(params, setting_fields(), strict=True):
        assert param.help == (flag.help or None)
        assert param.multiple == flag.repeatable
        assert param.is_flag == (flag.kind is bool)
        if flag.choices:
            assert tuple(param.type.choices) == flag.choices  # type: ignore[attr-defined]
        if not flag.repeatable:
            assert param.default == default
    ctx = run_command.make_context("run", [])
    assert RunSettings(**ctx.params) == RunSettings()  # the defaults are the model's


class _Recorder:
    """Stands in for Locust's parser: what `add_arguments` declares, without importing
    Locust (which patches the standard library)."""

    def __init__(self) -> None:
        self.flags: dict[str, dict[str, Any]] = {}

    def add_argument(self, *names: str, **how: Any) -> None:
        for name in names:
            self.flags[name] = how


def test_locusts_flags_of_the_same_name_come_from_the_model() -> None:
    recorder = _Recorder()
    options.add_arguments(recorder)
    shared = RUN_FLAGS & set(recorder.flags)
    assert shared >= {"--workload", "--api", "--model", "--slo", "--telemetry", "--seed",
                      "--tokenizer", "--max-concurrency"}
    for name in shared:
        how = recorder.flags[name]
        setting = next(s for s, flag, _ in setting_fields() if flag.name == name)
        assert how["help"].startswith(flag_of(setting).help), name
        assert tuple(how.get("choices", ())) == flag_of(setting).choices, name


def _plan(tmp_path: Path, *args: str) -> RunPlan:
    wl = tmp_path / "flood.yaml"
    wl.write_text("workloads:\n  - {kind: short_query_flood, name: f, "
                  "load: {kind: open, rate_rps: 2}}\n")
    return plan_from_flags(dict(run_command.make_context(
        "run", ["--workload", str(wl), *args]).params))


def _parsed(run_dir: Path) -> SimpleNamespace:
    """Locust's parsed options as its parser leaves them, with `--plan` given."""
    recorder = _Recorder()
    options.add_arguments(recorder)
    parsed = SimpleNamespace(**{how["dest"]: how["default"] for how in recorder.flags.values()})
    parsed.zh_plan = str(run_dir / PLAN_FILE)
    return parsed


def _read_back(run_dir: Path, hidden: dict[str, Any], monkeypatch: pytest.MonkeyPatch,
               ) -> RunSettings:
    environment = SimpleNamespace(parsed_options=_parsed(run_dir))
    monkeypatch.setenv(options.PLAN_SECRETS_ENV, json.dumps(hidden))
    options.apply_plan(environment)
    return options.run_settings(environment)


def test_locust_reads_the_plan_not_a_copy_of_the_flags(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    plan = _plan(tmp_path, "--rate", "3.5", "--requests", "40", "--max-concurrency", "6",
                 "--seed", "9", "--api", "openai-completions", "--model", "m1",
                 "--slo", "ttft_p99_ms=500,tpot_p99_ms=50", "--telemetry", "loadgen",
                 "--sim-args", "--time-scale '4'")
    plan.tokenizer = tmp_path / "tok.json"  # the CLI would read it; this test need not
    cmd = locust_command(plan, "http://127.0.0.1:9", tmp_path)
    assert {a for a in cmd if a.startswith("--")} & RUN_FLAGS <= LOCUST_OWN
    assert cmd[cmd.index("--plan") + 1] == str(tmp_path / PLAN_FILE)
    hidden = write_plan(plan, tmp_path)
    assert hidden == {}
    settings = _read_back(tmp_path, hidden, monkeypatch)
    assert settings.workloads == (plan.workloads[0],)
    assert (settings.api, settings.model, settings.seed) == ("openai-completions", "m1", 9)
    assert settings.slo_targets == {"ttft_p99_ms": 500.0, "tpot_p99_ms": 50.0}
    assert settings.telemetry == "loadgen"
    assert settings.sim_argv == ["--time-scale", "4"]
    assert settings.tokenizer == tmp_path / "tok.json"
    assert (settings.rate, settings.requests, settings.max_concurrency) == (3.5, 40, 6)


def test_a_plan_without_limits_reads_as_no_limits(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    write_plan(_plan(tmp_path, "--users", "2"), tmp_path)
    settings = _read_back(tmp_path, {}, monkeypatch)
    assert (settings.rate, settings.requests, settings.max_concurrency,
            settings.tokenizer, settings.slo, settings.model) == (None, None, None, None, "", "")


def test_locust_by_hand_reads_its_flags_as_the_settings() -> None:
    """No plan: Locust's own defaults (its telemetry is the target's /metrics alone),
    and a flag given is typed as its field declares."""
    parsed = _parsed(Path("unused"))
    parsed.zh_plan = ""
    assert options.run_settings(SimpleNamespace(parsed_options=parsed)) == RunSettings(
        telemetry="prom")
    parsed.zh_workloads, parsed.zh_rate = ["a.yaml", "b.yaml"], 2.0
    settings = options.run_settings(SimpleNamespace(parsed_options=parsed))
    assert (settings.workloads, settings.rate) == ((Path("a.yaml"), Path("b.yaml")), 2.0)
    assert options.run_settings(SimpleNamespace()) == RunSettings(telemetry="prom")


def test_plan_json_holds_no_secret_and_locust_still_gets_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = "http://scraper:hunter2secret@metrics.example:9400/metrics"
    plan = _plan(tmp_path, "--telemetry", f"prom={url}",
                 "--host", "http://user:pa55word1@target.example:8000")
    hidden = write_plan(plan, tmp_path)
    written = (tmp_path / PLAN_FILE).read_text()
    assert "hunter2secret" not in written and "pa55word1" not in written
    assert json.loads(written)["telemetry"] == "prom=http://***@metrics.example:9400/metrics"
    assert set(hidden) == {"host", "telemetry"}
    assert _read_back(tmp_path, hidden, monkeypatch).telemetry == f"prom={url}"


def test_an_unreadable_plan_is_one_line_that_names_it(tmp_path: Path) -> None:
    (tmp_path / PLAN_FILE).write_text("{not json")
    with pytest.raises(ValueError, match=r"--plan .*plan\.json"):
        options.apply_plan(SimpleNamespace(parsed_options=_parsed(tmp_path)))
