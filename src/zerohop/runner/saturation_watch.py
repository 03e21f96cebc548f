"""`zerohop run --stop-when-saturated`, the runner's side: the load ended on the live
saturation verdict (`loadgen/live_verdict.py`, which the progress line follows) is a
finished run, and the manifest and the console say so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from zerohop.core.layout import SATURATION_STOP_KEY

# the progress line's watch; it lives with the load generator, whose web tab reads it too
from zerohop.loadgen.live_verdict import SaturationWatch as SaturationWatch
from zerohop.report.present_saturation import SIGNAL_WORDS
from zerohop.storage import run_folder as results


def note_saturation_stop(run_dir: Path, stopped: dict[str, Any]) -> None:
    """A load ended by `--stop-when-saturated` is a finished run, not an interrupted one:
    the manifest says so (and keeps the verdict it acted on), the console says why."""
    results.update_manifest(run_dir, status="completed",
                            end_reason="stopped early: saturated",
                            **{SATURATION_STOP_KEY: stopped})
    signal = SIGNAL_WORDS.get(str(stopped.get("signal")), str(stopped.get("signal")))
    rate = stopped.get("offered_rps")
    click.echo(f"zerohop: stopped early at {stopped['stopped_at_s']:.0f} s of the planned "
               f"{stopped['planned_s']:g} s (--stop-when-saturated): saturated since "
               f"{stopped['since_s']:.0f} s by {signal}"
               + (f" at {rate:.3g} req/s offered" if rate is not None else ""))
