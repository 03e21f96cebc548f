"""`zerohop report` and `zerohop compare`: thin click wrappers over build.py.

Bad input (a missing folder, no records, a malformed manifest, a bad alert rule)
prints one line naming the problem and exits 2, without a traceback. The analysis
stack (pandas, scipy, pyarrow) is imported only when a command runs, so listing the
`zerohop` subcommands stays fast.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn, TypeVar

import click

from zerohop.core.exit_codes import EXIT_BAD_INPUT, EXIT_REGRESSION
from zerohop.core.layout import SUMMARY_FILE

T = TypeVar("T")


@click.command(name="report")
@click.argument("results_dir", type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Where to write the page (default: RESULTS_DIR/report.html).",
)
@click.option(
    "--window",
    "window_s",
    type=float,
    default=2.0,
    show_default=True,
    help="Analysis window in seconds (time series and correlation).",
)
@click.option(
    "--max-lag",
    "max_lag_windows",
    type=int,
    default=5,
    show_default=True,
    help="Correlation lag search: ± this many windows.",
)
@click.option(
    "--alert",
    "alert_texts",
    multiple=True,
    metavar="RULE",
    help="Alert rule, repeatable, e.g. 'pcie_rx_bytes_per_s > 2.75e9 for 10s'. "
    "Replaces the default rules.",
)
@click.option(
    "--alerts-file",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="YAML list of alert rules (strings or mappings). Replaces the default rules.",
)
@click.option("--no-alerts", is_flag=True, help="Evaluate no alert rules at all.")
def report_command(
    results_dir: Path,
    output: Path | None,
    window_s: float,
    max_lag_windows: int,
    alert_texts: tuple[str, ...],
    alerts_file: Path | None,
    no_alerts: bool,
) -> None:
    """Write a self-contained HTML report of one results folder."""

    def run() -> Path:
        from zerohop.analysis.server.alerts import load_rules_file, parse_rule
        from zerohop.report.build import build_report

        rules = None
        if no_alerts:
            rules = []
        elif alert_texts or alerts_file:
            rules = [parse_rule(text) for text in alert_texts]
            if alerts_file is not None:
                rules += load_rules_file(alerts_file)
        return build_report(
            results_dir,
            output,
            window_s=window_s,
            alert_rules=rules,
            max_lag_windows=max_lag_windows,
            summary=True,
        )

    path = _or_exit(run)
    click.echo(f"report written: {path} ({path.stat().st_size / 1e6:.2f} MB); "
               f"{Path(results_dir) / SUMMARY_FILE}")


@click.command(name="compare")
@click.argument("results_dirs", nargs=-1, type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Where to write the comparison page (default: compare.html in the last run's "
    "folder, next to the data it judges).",
)
@click.option(
    "--layer-of",
    type=click.Path(path_type=Path),
    default=None,
    help="The direct run; the other runs are the same workload through an extra layer "
    "(adds a per-percentile latency budget).",
)
@click.option(
    "--threshold",
    type=click.Choice(["strict", "default", "lenient"]),
    default="default",
    show_default=True,
    help="Smallest change called better/worse: 0 %, 5 % or 10 % of the baseline.",
)
@click.option(
    "--boot", "n_boot", type=int, default=2000, show_default=True, help="Bootstrap draws."
)
@click.option("--seed", type=int, default=0, show_default=True, help="Bootstrap seed.")
@click.option(
    "--fail-on-worse",
    is_flag=True,
    help="Exit 1 when any metric of any workload is worse (for CI).",
)
@click.option(
    "--max-answers-changed",
    type=float,
    default=None,
    help="Exit 1 when more than this share (0-1) of a candidate's answer-probe answers "
    "changed under load (runs made with --answer-probe).",
)
def compare_command(
    results_dirs: tuple[Path, ...],
    output: Path | None,
    layer_of: Path | None,
    threshold: str,
    n_boot: int,
    seed: int,
    fail_on_worse: bool,
    max_answers_changed: float | None,
) -> None:
    """Compare runs: the first folder is the baseline, each other one a candidate."""
    from zerohop.report.build import compare_dirs, write_comparison
    from zerohop.report.present_compare import logical_line, verdict_line

    comparisons = _or_exit(
        lambda: compare_dirs(
            list(results_dirs), layer_of=layer_of, threshold=threshold, n_boot=n_boot, seed=seed
        )
    )
    if output is None:
        output = Path(results_dirs[-1]) / "compare.html"
    path = _or_exit(lambda: write_comparison(comparisons, output))
    for comparison in comparisons:
        click.echo(f"{comparison.candidate} vs {comparison.baseline}: {verdict_line(comparison)}")
        logical = logical_line(comparison)
        if logical is not None:
            click.echo(f"  {logical}")
    click.echo(f"comparison written: {path}")
    worse = any(v in ("worse", "mixed") for c in comparisons for v in c.verdicts.values())
    changed = False
    if max_answers_changed is not None:
        from zerohop.report.answers_gate import answers_gate

        lines, changed = _or_exit(lambda: answers_gate(results_dirs[1:], max_answers_changed))
        for line in lines:
            click.echo(line)
    if (fail_on_worse and worse) or changed:
        sys.exit(EXIT_REGRESSION)


def _or_exit(action: Callable[[], T]) -> T:
    from zerohop.analysis.run_data import ReportInputError
    from zerohop.analysis.server.alerts import AlertRuleError
    from zerohop.report.render import TemplatesNotFoundError

    try:
        return action()
    except (ReportInputError, AlertRuleError, TemplatesNotFoundError) as exc:
        _bad_input(str(exc))
    except OSError as exc:
        _bad_input(f"{exc.strerror or exc}: {exc.filename}" if exc.filename else str(exc))


def _bad_input(message: str) -> NoReturn:
    click.echo(f"zerohop: error: {message.splitlines()[0] if message else 'bad input'}", err=True)
    sys.exit(EXIT_BAD_INPUT)
