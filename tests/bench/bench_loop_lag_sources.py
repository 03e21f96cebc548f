"""What holds a Locust process's gevent hub outside the requests themselves?

The default `zerohop run` once flagged itself ("load generator loop lag p99 71.8 ms >
10 ms") at 20 % CPU. The loop-lag probe sleeps 10 ms and records how late it wakes, so
any single blocking call longer than 10 ms in its lifetime flags the run. This times,
in a process with what a Locust worker imports, each one-off blocking piece of work
that ran while the probe was on:

- `inspect.stack()` the first time (Locust's `runner.stop()` calls it to log its caller:
  it resolves the real path of every loaded module) and the second time;
- reading and planning the default trace replay: the whole Azure conversation trace
  (19,366 rows, when a copy is at hand) and the shipped slice (3,600 rows);
- building one long-context prompt at the default workload's largest size (32k tokens).

    python tests/bench/bench_loop_lag_sources.py [--trace PATH_TO_FULL_AZURE_CONV_CSV]

Run it on a quiet machine: every figure is a wall time, and on a shared machine the
other processes' CPU time lands in them.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "src"))


def _ms(fn: object) -> float:
    t0 = time.perf_counter()
    fn()  # type: ignore[operator]
    return (time.perf_counter() - t0) * 1000.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, default=None,
                        help="the full AzureLLMInferenceTrace_conv.csv, if you have it")
    args = parser.parse_args()

    import gevent.monkey

    gevent.monkey.patch_all()
    import importlib
    import inspect

    import numpy as np

    for name in ("locust.main", "locust.runners", "zerohop.loadgen.hooks",
                 "zerohop.telemetry.recorder"):
        importlib.import_module(name)  # what a Locust process has loaded
    from zerohop.workloads.content.prompts import PromptBuilder
    from zerohop.workloads.schema.data_paths import package_data_dir
    from zerohop.workloads.timing.traces import read_trace

    print(f"modules loaded: {len(sys.modules)}")
    print(f"inspect.stack() first call:  {_ms(inspect.stack):8.1f} ms")
    print(f"inspect.stack() second call: {_ms(inspect.stack):8.1f} ms")
    slice_path = package_data_dir() / "traces" / "azure_conv_first3600.csv"
    slice_ms = _ms(lambda: read_trace(slice_path, "azure_csv"))
    print(f"read shipped trace slice:    {slice_ms:8.1f} ms")
    if args.trace is not None:
        print(f"read full trace:             "
              f"{_ms(lambda: read_trace(args.trace, 'azure_csv')):8.1f} ms")
    builder = PromptBuilder(seed=1)
    rng = np.random.default_rng(1)
    print(f"build one 32k-unit prompt:   {_ms(lambda: builder.build_text(32768, rng)):8.1f} ms")


if __name__ == "__main__":
    main()
