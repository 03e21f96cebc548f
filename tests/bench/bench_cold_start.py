"""Cold-start cost of zerohop's processes: what a user pays before the first flag is read,
and what every Locust process `zerohop run` starts pays before its first request.

Each command starts a fresh interpreter; the commands alternate, round after round, so a
busy moment on the machine falls on all of them alike. Printed per command: the median
wall time and the median CPU time (user + system of the child) over the rounds.

    python tests/bench/bench_cold_start.py                        # this checkout
    python tests/bench/bench_cold_start.py --python /other/.venv/bin/python --cwd /other

`run --users 0` is a refused input (exit 2): it measures the imports `zerohop run`
makes before it can say so. The locustfile import runs every shipped locustfile in
loadtests/ the way Locust does (runpy), which is what the Locust child imports.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

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
    parser.add_argument("--python", default=sys.executable, help="interpreter to time")
    parser.add_argument("--cwd", type=Path, default=REPO, help="checkout to run in")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    walls: dict[str, list[float]] = {name: [] for name in COMMANDS}
    cpus: dict[str, list[float]] = {name: [] for name in COMMANDS}
    codes: dict[str, set[int]] = {name: set() for name in COMMANDS}
    for command in COMMANDS.values():  # one unmeasured start each: a warm disk cache
        timed(args.python, command, args.cwd)
    for _ in range(args.rounds):
        for name, command in COMMANDS.items():
            wall, cpu, code = timed(args.python, command, args.cwd)
            walls[name].append(wall)
            cpus[name].append(cpu)
            codes[name].add(code)

    print(f"{args.python} in {args.cwd}, median of {args.rounds} alternating rounds")
    print(f"{'command':<24} {'wall s':>8} {'CPU s':>8}  exit")
    for name in COMMANDS:
        print(f"{name:<24} {statistics.median(walls[name]):8.3f} "
              f"{statistics.median(cpus[name]):8.3f}  {sorted(codes[name])}")


if __name__ == "__main__":
    main()
