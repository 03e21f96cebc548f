"""The layer process's CPU and memory over a sweep point, by pid, on the telemetry clock.

`--layer-pid NAME=PID` names the process behind a `--layer-url` arm. While a point runs,
the telemetry's own `ProcessSampler` (psutil CPU % of one core and RSS, the figures it
keeps for the load generator) reads each pid on a thread; the point keeps the samples
inside its load window (`analysis.layer_knee.process_figures`), so the start-up and the
report's build are not counted.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping

import psutil

from zerohop.telemetry.client_process import ProcessSampler
from zerohop.telemetry.samples import TelemetryClock

SAMPLE_INTERVAL_S = 0.5


def parse_layer_pids(values: Iterable[str], arms: Iterable[str]) -> dict[str, int]:
    """--layer-pid values (`NAME=PID`, repeated) → {arm: pid}; each NAME an arm of
    --layer-url, each PID a running process. ValueError says which value is wrong."""
    known = set(arms)
    pids: dict[str, int] = {}
    for value in values:
        name, sep, text = value.partition("=")
        name = name.strip()
        try:
            pid = int(text.strip())
        except ValueError:
            pid = 0
        if not sep or pid <= 0:
            raise ValueError(f"--layer-pid: {value!r} is not NAME=PID (a positive integer)")
        if name not in known:
            raise ValueError(f"--layer-pid: {name!r} is not a --layer-url arm "
                             f"({', '.join(sorted(known)) or 'none given'})")
        if name in pids:
            raise ValueError(f"--layer-pid: arm {name!r} given twice")
        if not psutil.pid_exists(pid):
            raise ValueError(f"--layer-pid: no process {pid} ({name})")
        pids[name] = pid
    return pids


class LayerProcessWatch:
    """Samples each layer pid every `interval_s` until `stop()`; `rows(arm)` are that
    process's (ts, metric, value) samples."""

    def __init__(self, pids: Mapping[str, int], interval_s: float = SAMPLE_INTERVAL_S) -> None:
        self.pids = dict(pids)
        self.clock = TelemetryClock()
        self.interval_s = interval_s
        self._samplers = {arm: ProcessSampler([pid], self.clock, interval_s=interval_s)
                          for arm, pid in self.pids.items()}
        self._rows: dict[str, list[tuple[float, str, float]]] = {a: [] for a in self.pids}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="layer-pid-sampler",
                                        daemon=True)

    def __enter__(self) -> LayerProcessWatch:
        if self.pids:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def rows(self, arm: str) -> list[tuple[float, str, float]]:
        return list(self._rows.get(arm, ()))

    def _loop(self) -> None:
        while True:
            ts = self.clock.now()
            for arm, sampler in self._samplers.items():
                self._rows[arm].extend((s.ts, s.metric, s.value) for s in sampler.tick(ts))
            if self._stop.wait(self.interval_s):
                return
