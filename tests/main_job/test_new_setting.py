"""Adding a run setting is one field on `RunSettings` (loadgen/run_settings.py): this test
adds one, `--warmup-note`, in a fresh process before zerohop is imported (as an edit of
that file would be), and finds it in `zerohop run --help`, in Locust's parser, in
plan.json, in the manifest's `config`, and in the settings the Locust process reads back
from plan.json. Nothing else is told of it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration  # a fresh interpreter imports the command line

_ADD_A_FIELD = '''
import dataclasses
from zerohop.loadgen import run_settings

@dataclasses.dataclass(frozen=True)
class RunSettings(run_settings.RunSettings):
    warmup_note: str = dataclasses.field(default="none", metadata=run_settings.flag(
        "--warmup-note", "A note the test adds.", locust=True))

run_settings.RunSettings = RunSettings  # what adding the field to the class does
'''

_LOOK = '''
import json, sys
from pathlib import Path
from types import SimpleNamespace
from zerohop.cli.main_job import plan_from_settings, run_command
from zerohop.core.layout import PLAN_FILE
from zerohop.loadgen import options
from zerohop.runner.locust_process import write_plan
from zerohop.runner.plan import manifest_config

run_dir, workload = Path(sys.argv[1]), sys.argv[2]
ctx = run_command.make_context("run", ["--workload", workload, "--warmup-note", "cold"])
plan = plan_from_settings(run_settings.RunSettings(**ctx.params))
write_plan(plan, run_dir)

class Parser:
    flags = {}
    def add_argument(self, name, **how):
        self.flags[name] = how

parser = Parser()
options.add_arguments(parser)
parsed = SimpleNamespace(**{how["dest"]: how["default"] for how in parser.flags.values()})
parsed.zh_plan = str(run_dir / PLAN_FILE)
environment = SimpleNamespace(parsed_options=parsed)
options.apply_plan(environment)
print(json.dumps({
    "help": run_command.get_help(ctx),
    "locust": parser.flags.get("--warmup-note", {}).get("help"),
    "plan_json": json.loads((run_dir / PLAN_FILE).read_text()).get("warmup_note"),
    "manifest": manifest_config(plan).get("warmup_note"),
    "locust_reads": options.run_settings(environment).warmup_note,
}))
'''


@pytest.fixture(scope="module")
def seen(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("new_setting")
    workload = folder / "flood.yaml"
    workload.write_text("workloads:\n  - {kind: short_query_flood, name: f, "
                        "load: {kind: open, rate_rps: 2}}\n")
    done = subprocess.run([sys.executable, "-c", _ADD_A_FIELD + _LOOK, str(folder),
                           str(workload)], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return found


def test_the_new_flag_is_in_zerohop_runs_help(seen: dict[str, Any]) -> None:
    assert "--warmup-note" in seen["help"] and "A note the test adds." in seen["help"]


def test_the_new_flag_is_one_of_locusts(seen: dict[str, Any]) -> None:
    assert seen["locust"] == "A note the test adds."


def test_the_new_setting_is_in_plan_json_and_the_manifest(seen: dict[str, Any]) -> None:
    assert seen["plan_json"] == "cold"
    assert seen["manifest"] == "cold"


def test_locust_reads_the_new_setting_back_from_plan_json(seen: dict[str, Any]) -> None:
    assert seen["locust_reads"] == "cold"
