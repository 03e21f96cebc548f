"""Progress while the benchmarks run, and per-step failure isolation.

`StepRecorder.step(...)` runs one measurement; if it raises, the failure is written down
(and the step's own cleanup has already run) and the next step goes on. A benchmark's
status is then "ok", "partial" (some steps failed) or "failed" (nothing measured).
"""

from __future__ import annotations

import contextlib
import sys
import time
import traceback
from collections.abc import Iterator, Sequence
from typing import Protocol, TextIO

from zerohop.microbench.schema import BenchmarkResult, CurvePoint, Stat, Status
from zerohop.microbench.stats import summarize


class Progress(Protocol):
    def advance(self, label: str) -> None: ...

    def note(self, text: str) -> None: ...


class NullProgress:
    def advance(self, label: str) -> None:
        pass

    def note(self, text: str) -> None:
        pass


class TerminalProgress:
    """A bar redrawn in place on a terminal; one flushed line per step otherwise (logs)."""

    def __init__(self, total: int, stream: TextIO | None = None, *, width: int = 28) -> None:
        self.total = max(total, 1)
        self.done = 0
        self._stream = stream if stream is not None else sys.stderr
        self._tty = bool(getattr(self._stream, "isatty", lambda: False)())
        self._width = width
        self._t0 = time.perf_counter()

    def render(self, label: str) -> str:
        filled = int(self._width * min(self.done, self.total) / self.total)
        bar = "#" * filled + "." * (self._width - filled)
        elapsed = time.perf_counter() - self._t0
        return f"[{bar}] {self.done:>3}/{self.total} {elapsed:6.1f}s  {label}"

    def advance(self, label: str) -> None:
        self.done += 1
        line = self.render(label)
        if self._tty:
            self._stream.write("\r\x1b[2K" + line)
            if self.done >= self.total:
                self._stream.write("\n")
        else:
            self._stream.write(line + "\n")
        self._stream.flush()

    def note(self, text: str) -> None:
        prefix = "\r\x1b[2K" if self._tty else ""
        self._stream.write(f"{prefix}  {text}\n")
        self._stream.flush()


class StepRecorder:
    """Collects one benchmark's metrics, curve points and step failures."""

    def __init__(self, name: str, progress: Progress) -> None:
        self.name = name
        self.progress = progress
        self.metrics: dict[str, Stat] = {}
        self.curve: list[CurvePoint] = []
        self.failures: list[str] = []
        self.warnings: list[str] = []

    @contextlib.contextmanager
    def step(self, label: str) -> Iterator[None]:
        try:
            yield
        except Exception as exc:  # one failed measurement must not stop the others
            where = traceback.extract_tb(exc.__traceback__)[-1]
            message = f"{label}: {type(exc).__name__}: {exc} (at {where.name}:{where.lineno})"
            self.failures.append(message)
            self.progress.note(f"{self.name}: FAILED {message}")
        finally:
            self.progress.advance(f"{self.name}: {label}")

    def add(self, metric: str, stat: Stat) -> None:
        if metric in self.metrics:
            raise ValueError(f"metric {metric!r} recorded twice")
        self.metrics[metric] = stat

    def add_samples(
        self, metric: str, samples: Sequence[float], *, unit: str, description: str
    ) -> None:
        """Record the summary (median, p99, spread: `stats.summarize`) of one metric's
        samples."""
        self.add(metric, summarize(samples, unit=unit, description=description))

    def warn(self, text: str) -> None:
        self.warnings.append(text)
        self.progress.note(f"{self.name}: {text}")

    def result(self, *, with_curve: bool = False) -> BenchmarkResult:
        curve = list(self.curve) if with_curve else None
        problems = self.failures + self.warnings
        if not self.failures and not self.warnings:
            return BenchmarkResult(status="ok", metrics=self.metrics, curve=curve)
        measured = bool(self.metrics) or bool(self.curve)
        status: Status = "partial" if measured else "failed"
        return BenchmarkResult(
            status=status, reason="; ".join(problems), metrics=self.metrics, curve=curve
        )
