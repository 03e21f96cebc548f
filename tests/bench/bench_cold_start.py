"""Cold-start cost of zerohop's processes: what a user pays before the first flag is read,
and what every Locust process `zerohop run` starts pays before its first request.

Each command starts a fresh interpreter; the commands (and the checkouts, given several)
alternate, round after round, so a busy moment on the machine falls on all of them
alike. Printed per command: the median wall time and the median CPU time (user + system
of the child) over the rounds.

    python tests/bench/bench_cold_start.py                        # this checkout
    python tests/bench/bench_cold_start.py --tree /before --tree .   # before and after

`run --users 0` is a refused input (exit 2): it measures the imports `zerohop run`
makes before it can say so. The locustfile import runs every shipped locustfile in
loadtests/ the way Locust does (runpy), which is what the Locust child imports.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PYTHON = Path(".venv/bin/python")  # each checkout's own interpreter and packages

LOCUSTFILES = ("import glob, runpy; "
               "[runpy.run_path(p) for p in sorted(glob.glob('loadtests/[!_]*.py'))]")

COMMANDS: dict[str, list[str]] = {
    "zerohop --version": ["-m", "zerohop", "--version"],
    "zerohop run --users 0": ["-m", "zerohop", "run", "--users", "0"],
    "locustfile import": ["-c", LOCUSTFILES],
}


def timed(python: str, args: list[str], cwd: Path) -> tuple[float, float, int]:
    """One cold start: (wall s, child CPU s, exit code)."""
    start = time.perf_counter()
    proc = subprocess.Popen([python, *args], cwd=cwd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_utime + usage.ru_stime, proc.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, action="append",
                        help="a checkout with its .venv (repeatable; default: this one)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    trees = [tree.resolve() for tree in args.tree or [REPO]]
    runs = [(tree, name) for tree in trees for name in COMMANDS]

    walls: dict[tuple[Path, str], list[float]] = {run: [] for run in runs}
    cpus: dict[tuple[Path, str], list[float]] = {run: [] for run in runs}
    codes: dict[tuple[Path, str], set[int]] = {run: set() for run in runs}
    for tree, name in runs:  # one unmeasured start each: a warm disk cache
        timed(str(tree / PYTHON), COMMANDS[name], tree)
    for _ in range(args.rounds):
        for run in runs:
            tree, name = run
            wall, cpu, code = timed(str(tree / PYTHON), COMMANDS[name], tree)
            walls[run].append(wall)
            cpus[run].append(cpu)
            codes[run].add(code)

    print(f"median of {args.rounds} alternating rounds")
    print(f"{'checkout':<24} {'command':<24} {'wall s':>8} {'CPU s':>8}  exit")
    for run in runs:
        tree, name = run
        print(f"{tree!s:<24} {name:<24} {statistics.median(walls[run]):8.3f} "
              f"{statistics.median(cpus[run]):8.3f}  {sorted(codes[run])}")

if __name__ == "__main__":
    main()
