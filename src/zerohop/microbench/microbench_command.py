"""`zerohop microbench`: run the GPU-floor microbenchmarks, print a table, write JSON.

Exit status: 0 when every selected benchmark is ok, or when there is no CUDA device
(the JSON then says "skipped" and why); 1 when a benchmark failed or is partial;
2 for bad options.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from zerohop.core.layout import MICROBENCH_FILE
from zerohop.microbench.plan import get_plan
from zerohop.microbench.progress import TerminalProgress
from zerohop.microbench.runner import parse_only, run_benchmarks
from zerohop.microbench.schema import MicrobenchResult, write_microbench
from zerohop.microbench.table import format_table

EXIT_OK = 0
EXIT_BENCH_FAILED = 1


@click.command("microbench")
@click.option(
    "--only",
    default=None,
    metavar="LIST",
    help="Comma-separated subset of launch,ring,pcie (default: all three).",
)
@click.option(
    "--quick",
    is_flag=True,
    help="Fewer samples; the PCIe sweep stops at 256 MiB instead of 1 GiB.",
)
@click.option(
    "--plan",
    "plan_name",
    type=click.Choice(["full", "quick", "smoke"]),
    default=None,
    hidden=True,
    help="Preset by name (smoke: seconds, for tests); overrides --quick.",
)
@click.option(
    "--out-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder to write microbench.json into (e.g. a run's results folder). "
    "Default: a new results/<UTC stamp>-microbench/ folder.",
)
@click.option(
    "--results-root",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("results"),
    show_default=True,
    help="Where the default run folder is created.",
)
@click.option("--device", type=click.IntRange(min=0), default=0, show_default=True,
              help="CUDA device index.")
def microbench_command(
    only: str | None,
    quick: bool,
    plan_name: str | None,
    out_dir: Path | None,
    results_root: Path,
    device: int,
) -> None:
    """Kernel-launch latency, ring-buffer enqueue and PCIe throughput on the real GPU.

    Progress goes to stderr, the table to stdout, the full result (schema
    zerohop.microbench v1) to microbench.json.
    """
    try:
        names = parse_only(only)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--only") from None
    plan = get_plan(plan_name or ("quick" if quick else "full"))
    click.echo(
        f"zerohop microbench: {', '.join(names)} ({plan.name} plan) on device {device}",
        err=True,
    )
    try:
        result = run_benchmarks(
            names,
            plan,
            device=device,
            progress_factory=lambda total: TerminalProgress(total, sys.stderr),
        )
    except ValueError as exc:  # e.g. a device index that does not exist
        raise click.BadParameter(str(exc), param_hint="--device") from None
    if result.status == "skipped":
        click.echo(f"{result.reason}; nothing was measured.", err=True)
    run_dir = out_dir if out_dir is not None else _new_run_dir(results_root)
    path = _write(result, run_dir, started=out_dir is None, device=device)
    click.echo(format_table(result), nl=False)
    click.echo(f"wrote {path}", err=True)
    sys.exit(EXIT_OK if result.status in ("ok", "skipped") else EXIT_BENCH_FAILED)


def _new_run_dir(root: Path) -> Path:
    from zerohop.storage.run_folder import new_run_dir

    return new_run_dir(root, "microbench")


def _write(result: MicrobenchResult, run_dir: Path, *, started: bool, device: int) -> Path:
    """microbench.json, plus a manifest when this command made the run folder (a folder
    given with --out-dir belongs to whoever made it)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    path = write_microbench(result, run_dir / MICROBENCH_FILE)
    if started:
        from zerohop.storage.run_folder import finish_manifest, start_manifest

        env = result.environment
        gpu = [] if env.gpu_name is None else [
            {"index": device, "name": env.gpu_name, "driver": env.driver_version}
        ]
        start_manifest(run_dir, name="microbench", gpu=gpu, microbench_status=result.status)
        finish_manifest(run_dir, status="completed", end_reason="finished")
    return path
