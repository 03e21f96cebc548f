"""README.md is a user guide whose commands must work: every `zerohop` and `locust`
command in its bash blocks, and in the docs pages the README sends a reader to for the
rest (`GUIDE_PAGES`), is parsed by the real command-line parsers (flags, choices,
types), and the two fresh-machine commands are the ones CI and the tests exercise. The
README stays short enough to read to the end (`MAX_README_LINES`)."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest

from zerohop.cli import cli

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()
MAX_README_LINES = 200
# the pages the README's sections moved into: their commands are checked as its own
GUIDE_PAGES = ("docs/running.md", "docs/locust.md", "docs/telemetry-and-report.md",
               "docs/embedded-target.md", "docs/virtual-clock.md", "docs/tests.md")
GUIDE = "\n".join([README, *((REPO / page).read_text() for page in GUIDE_PAGES)])


def bash_commands(text: str = GUIDE) -> list[list[str]]:
    """Each command of the text's bash blocks, split on `&&`, comments dropped."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split("  #", 1)[0].strip()
            for part in line.split("&&"):
                words = shlex.split(part)
                if words:
                    commands.append(words)
    return commands


def _zerohop_commands() -> list[list[str]]:
    found = []
    for words in bash_commands():
        if Path(words[0]).name == "zerohop":
            found.append(words[1:])
    return found


def _locust_commands() -> list[list[str]]:
    return [words[1:] for words in bash_commands() if words[0] == "locust"]


@pytest.mark.unit
def test_readme_starts_with_the_two_fresh_machine_commands() -> None:
    head = README.split("## What a run gives")[0]
    blocks = re.findall(r"```bash\n(.*?)```", head, flags=re.S)
    assert len(blocks) == 2
    install = "python3 -m venv .venv && .venv/bin/pip install -e '.[dev]'"
    assert blocks[0].startswith(install) and ".venv/bin/zerohop run" in blocks[0]
    assert blocks[1].strip() == install + " && .venv/bin/python -m pytest"
    ci = (REPO / ".ci" / "run").read_text()
    assert "pip install -q -e '.[dev]'" in ci and "-m pytest" in ci


@pytest.mark.unit
@pytest.mark.parametrize("args", _zerohop_commands(), ids=lambda a: " ".join(a)[:60])
def test_every_zerohop_command_parses(args: list[str]) -> None:
    ctx = click.Context(cli)
    command = cli.get_command(ctx, args[0])
    assert command is not None, f"README names an unknown subcommand {args[0]!r}"
    command.make_context(args[0], list(args[1:]), parent=ctx)  # raises on a bad flag


@pytest.mark.integration  # runs Locust's parser in a child process
def test_every_locust_command_parses() -> None:
    """Parsed by Locust's own parser plus zerohop's flags, in a child process: importing
    Locust monkey-patches the interpreter, which the rest of the test session must not
    inherit."""
    commands = [[a.replace("loadtests/", str(REPO / "loadtests")) for a in args]
                for args in _locust_commands()]
    assert len(commands) >= 4
    script = """
import json, sys
from locust.argument_parser import get_parser
from zerohop.loadgen.options import add_arguments
known = {"ShortQueryFlood", "LongContextSummarisation", "LoRAMix", "TraceReplay"}
for args in json.loads(sys.argv[1]):
    parser = get_parser(default_config_files=())
    add_arguments(parser)
    options = parser.parse_args(args)
    unknown = set(options.user_classes or []) - known
    assert not unknown, (args, unknown)
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", script, json.dumps(commands)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


@pytest.mark.unit
def test_readme_is_short_and_links_only_to_pages_that_exist() -> None:
    assert len(README.splitlines()) <= MAX_README_LINES
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README)
    assert set(GUIDE_PAGES) <= set(links), set(GUIDE_PAGES) - set(links)
    assert [link for link in links if not (REPO / link).exists()] == []


@pytest.mark.unit
def test_readme_mentions_every_subcommand() -> None:
    ctx = click.Context(cli)
    for name in cli.list_commands(ctx):
        if name not in ("consolidate",):
            assert f"zerohop {name}" in README, name
