"""`zerohop locustfile`: where the shipped locustfiles are, so plain Locust can run them
from any install: `locust -f "$(zerohop locustfile)"`."""

from __future__ import annotations

import sys

import click

from zerohop.core.exit_codes import EXIT_BAD_INPUT
from zerohop.shipped import ShippedFilesError, locustfiles
from zerohop.workloads.kind_registry import workload_kinds

KIND_OF_CLASS = {kind.user_class: kind.name for kind in workload_kinds()}


@click.command("locustfile")
@click.option("--only", "classes", multiple=True, type=click.Choice(sorted(KIND_OF_CLASS)),
              help="Only the files of these workload classes (repeatable).")
def locustfile_command(classes: tuple[str, ...]) -> None:
    """Print the path of the shipped locustfiles: their folder, or with --only the files,
    comma-separated, as `locust -f` takes them."""
    try:
        paths = locustfiles([KIND_OF_CLASS[name] for name in classes])
    except ShippedFilesError as exc:
        click.echo(f"zerohop: error: {exc}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    click.echo(",".join(str(path) for path in paths))
