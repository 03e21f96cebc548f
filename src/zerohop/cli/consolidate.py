"""`zerohop consolidate`: rebuild a killed run's Parquet files from what its sinks flushed."""

from __future__ import annotations

import os
from pathlib import Path

import click

from zerohop.core.layout import RECORDS_DIR
from zerohop.storage.run_folder import (
    consolidate,
    finish_manifest,
    read_manifest,
    read_record_rows,
)
from zerohop.telemetry.store import consolidate_telemetry


@click.command("consolidate")
@click.argument("run_dir", type=click.Path(file_okay=False, path_type=Path))
def consolidate_command(run_dir: Path) -> None:
    """Rebuild requests.parquet (and telemetry.parquet) of RUN_DIR from what was flushed,
    e.g. after the run was killed."""
    if not (run_dir / RECORDS_DIR).is_dir():
        raise click.UsageError(f"{run_dir}: not a zerohop results folder (no {RECORDS_DIR}/)")
    out = consolidate(run_dir)
    rows, bad = read_record_rows(run_dir)
    msg = f"{out}: {len(rows)} records"
    if bad:
        msg += f" ({bad} unreadable lines skipped)"
    tel = consolidate_telemetry(run_dir)
    if tel is not None:
        msg += f"; {tel}"
    manifest = read_manifest(run_dir)
    if manifest.get("status") == "running" and not _pid_alive(manifest.get("pid")):
        finish_manifest(run_dir, status="interrupted", end_reason="process died; consolidated")
    click.echo(msg)


def _pid_alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
