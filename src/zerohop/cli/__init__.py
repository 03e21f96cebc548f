"""The `zerohop` command. Subcommands live in their own modules and are imported only
when used, so `zerohop --help` stays fast and a missing optional part (CuPy, say)
never breaks the others."""

from __future__ import annotations

import importlib
import sys

import click

# name -> "module:attribute" of a click.Command. Listed in the order help shows them.
SUBCOMMANDS: dict[str, str] = {
    "run": "zerohop.cli.main_job:run_command",
    "selfcheck": "zerohop.cli.selfcheck:selfcheck_command",
    "sim": "zerohop.sim.sim_command:sim_command",
    "proxy": "zerohop.proxy.proxy_command:proxy_command",
    "simulate": "zerohop.cli.simulate:simulate_command",
    "report": "zerohop.report.report_commands:report_command",
    "compare": "zerohop.report.report_commands:compare_command",
    "microbench": "zerohop.microbench.microbench_command:microbench_command",
    "exporter": "zerohop.telemetry.exporter:exporter_command",
    "calibrate": "zerohop.planning.calibrate:calibrate_command",
    "consolidate": "zerohop.cli.consolidate:consolidate_command",
    "sweep": "zerohop.planning.sweep_cli:sweep_command",
    "capacity": "zerohop.planning.capacity_cli:capacity_command",
    "nightly": "zerohop.planning.nightly:nightly_command",
    "locustfile": "zerohop.cli.locustfile:locustfile_command",
}



class LazyGroup(click.Group):
    """A click group that imports each subcommand's module on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [name for name in SUBCOMMANDS if self._load(name) is not None]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return self._load(cmd_name)

    @staticmethod
    def _load(name: str) -> click.Command | None:
        target = SUBCOMMANDS.get(name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        module = importlib.import_module(module_name)
        command = getattr(module, attr, None)
        return command if isinstance(command, click.Command) else None


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="zerohop")
def cli() -> None:
    """zerohop: what every hop between an LLM client and the GPU costs.

    Start with `zerohop run` (embedded target, all workloads, report).
    """


def main() -> None:
    """Every command's errors in one style, `zerohop: error: ...` on one line: click's
    own (an unknown option, a bad value) included, which it would print as `Error:`
    after the usage text. Plugins load first: the commands' choices read the registries."""
    _load_plugins(sys.argv[1:])
    try:
        code = cli.main(prog_name="zerohop", standalone_mode=False)
    except KeyboardInterrupt:
        sys.exit(130)
    except click.exceptions.Abort:
        sys.exit(130)
    except click.exceptions.NoArgsIsHelpError as exc:  # bare `zerohop`: the help
        click.echo(exc.format_message())
        sys.exit(exc.exit_code)
    except click.UsageError as exc:
        path = exc.ctx.command_path if exc.ctx is not None else "zerohop"
        click.echo(f"zerohop: error: {exc.format_message()} (see {path} --help)", err=True)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        click.echo(f"zerohop: error: {exc.format_message()}", err=True)
        sys.exit(exc.exit_code)
    sys.exit(code if isinstance(code, int) else 0)


def _load_plugins(argv: list[str]) -> None:
    """Load the `--plugin` modules of the command line (and those `ZEROHOP_PLUGINS`
    names already) and the entry points, and hand the names on to every child process
    through `ZEROHOP_PLUGINS`. A plugin that fails: one line, exit 2."""
    from zerohop.core.exit_codes import EXIT_BAD_INPUT
    from zerohop.core.plugins import PluginError, load_plugins, plugins_from_argv, publish_plugins

    names = publish_plugins(plugins_from_argv(argv))
    try:
        load_plugins(names)
    except PluginError as exc:
        click.echo(f"zerohop: error: {exc}", err=True)
        sys.exit(EXIT_BAD_INPUT)
