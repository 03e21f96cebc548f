"""docs/coming-from.md's commands work. Every `zerohop` line of its bash blocks is parsed
by the real `zerohop run` (or `sweep`) parser and, for `run`, planned as the CLI plans it
(lengths, datasets and load flags validated, the benchmark's workload file written and
loaded), in the unit tier; every flag its tables name is one of zerohop's. Running them
all would cost a minute of CI, so the integration test runs one line per tool against
the embedded target, cut to a few requests, and checks every prompt is the asked size
and every answer the asked length (about 20 s on a 2-core CI machine)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pandas as pd
import pytest

from zerohop.cli import cli

REPO = Path(__file__).resolve().parents[2]
PAGE = (REPO / "docs" / "coming-from.md").read_text(encoding="utf-8")
TOOLS = ("The one-line benchmark", "`vllm bench serve`", "`aiperf profile`",
         "`guidellm benchmark`")


def zerohop_lines(text: str = PAGE) -> list[list[str]]:
    """The arguments of each `zerohop` line in the text's bash blocks, comments dropped."""
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            words = shlex.split(line.split("  #", 1)[0])
            if words and words[0] == "zerohop":
                lines.append(words[1:])
    return lines


def section(title: str) -> str:
    return PAGE.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def _context(args: list[str]) -> click.Context:
    parent = click.Context(cli)
    command = cli.get_command(parent, args[0])
    assert command is not None, f"unknown subcommand {args[0]!r}"
    return command.make_context(args[0], list(args[1:]), parent=parent)


@pytest.mark.unit
def test_every_tool_has_its_commands() -> None:
    for title in TOOLS:
        assert zerohop_lines(section(title)), title
    assert len(zerohop_lines()) >= 12


@pytest.mark.unit
@pytest.mark.parametrize("args", zerohop_lines(), ids=lambda a: " ".join(a)[:70])
def test_every_line_parses_and_plans(args: list[str], tmp_path: Path) -> None:
    from zerohop.cli.main_job import plan_from_flags

    ctx = _context([*args, "--results-dir", str(tmp_path)])
    if args[0] == "run":
        plan = plan_from_flags(dict(ctx.params))  # raises RunError on a bad value
        assert plan.workloads, args


@pytest.mark.unit
def test_every_flag_the_tables_give_is_zerohops() -> None:
    known = set()
    for name in ("run", "sweep"):
        command = _context([name]).command
        known |= {opt for param in command.params for opt in getattr(param, "opts", [])}
    named = set()
    for title in TOOLS[1:]:
        for row in re.findall(r"^\|.*\| (.*) \|$", section(title), flags=re.M):
            named |= set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", row))
    assert named and named <= known, named - known


def run_line(args: list[str], out: Path) -> tuple[pd.DataFrame, str]:
    """The line run as written on the embedded target, cut to 6 requests."""
    cut = [*args, "--requests", "6", "--duration", "60s", "--no-report", "--telemetry",
           "none", "--microbench", "off", "--results-dir", str(out)]
    done = subprocess.run([sys.executable, "-m", "zerohop", *cut], capture_output=True,
                          text=True, timeout=180)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    [run_dir] = [p for p in out.iterdir() if p.is_dir() and not p.name.startswith(".")]
    assert (run_dir / "results.csv").is_file()
    return pd.read_parquet(run_dir / "requests.parquet"), done.stdout


def _flag(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None


@pytest.mark.integration
@pytest.mark.parametrize("tool", TOOLS[1:])
def test_one_line_per_tool_runs_with_every_prompt_the_asked_size(tool: str,
                                                                  tmp_path: Path) -> None:
    # the first with chosen lengths, but not one user: it would send the six in turn
    args = next(a for a in zerohop_lines(section(tool))
                if "--input-tokens" in a and _flag(a, "--users") != "1")
    records, console = run_line(args, tmp_path)
    ok = records[records["outcome"] == "ok"]
    assert len(ok) == 6 and "Successful requests:" in console, console[-2000:]
    assert (ok["prompt_token_source"] == "tokenize").all()
    assert (ok["input_tokens"] == ok["target_input_tokens"]).all(), ok[
        ["input_tokens", "target_input_tokens"]]
    assert (ok["output_tokens"] == ok["max_tokens"]).all()  # ignore_eos held each answer
    fixed: dict[str, Any] = {"input_tokens": _flag(args, "--input-tokens"),
                             "max_tokens": _flag(args, "--output-tokens")}
    for column, value in fixed.items():
        if value is not None and value.isdigit():
            assert (ok[column] == int(value)).all(), column
