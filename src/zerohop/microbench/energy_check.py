"""GPU energy over a fixed busy loop, from NVML's total-energy counter.

`microbench/run_on_gpu.sh` runs it on a lent GPU: the counter is read, a loop of
matrix products keeps the GPU busy for a fixed time, the counter is read again once the
work has finished, and the joules and mean watts go into a small JSON beside the driver's
power gauge at the start and at the end (a 1 s average on recent GPUs). The counter's
difference is what `analysis/server/energy.py` relies on in a run, checked here on real silicon.

    python -m zerohop.microbench.energy_check OUT.json [--seconds 5] [--device 0]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType
from typing import Protocol

from zerohop.microbench.gpu_env import (
    NoCudaDevice,
    cuda_unavailable_reason,
    load_cupy,
    nvml_reader,
    pci_bus_id,
)

MATRIX = 4096  # float32 4096² products: ~0.14 TFLOP each, milliseconds on any datacentre GPU


class EnergyUnavailable(RuntimeError):
    """The counter could not be read, or restarted during the loop."""


class EnergyMeter(Protocol):
    def total_energy_j(self) -> float | None: ...
    def power_w(self) -> float | None: ...


@dataclass(frozen=True)
class EnergyCheck:
    seconds: float
    iterations: int
    energy_j: float
    mean_w: float
    power_w_before: float | None  # the driver's power gauge, for comparison
    power_w_after: float | None


def measure(meter: EnergyMeter, busy_once: Callable[[], None], sync: Callable[[], None],
            *, seconds: float, clock: Callable[[], float] = time.perf_counter) -> EnergyCheck:
    """Run `busy_once` (then `sync`) until `seconds` have passed; the counter is read
    with nothing in flight on either side, so the joules are the loop's."""
    sync()
    power_before = meter.power_w()
    before = meter.total_energy_j()
    if before is None:
        raise EnergyUnavailable("NVML gives no total-energy counter for this GPU")
    start = clock()
    iterations = 0
    while clock() - start < seconds:
        busy_once()
        sync()
        iterations += 1
    elapsed = clock() - start
    after = meter.total_energy_j()
    power_after = meter.power_w()
    if after is None or after < before:
        raise EnergyUnavailable(f"the energy counter went from {before} J to {after} J: "
                                "unreadable or restarted (driver reload) during the loop")
    energy = after - before
    return EnergyCheck(seconds=elapsed, iterations=iterations, energy_j=energy,
                       mean_w=energy / elapsed, power_w_before=power_before,
                       power_w_after=power_after)


def run_energy_check(device: int = 0, seconds: float = 5.0) -> EnergyCheck:
    """The check on a real GPU (raises NoCudaDevice or EnergyUnavailable)."""
    cp = load_cupy(device)
    a = cp.random.random((MATRIX, MATRIX), dtype=cp.float32)
    b = cp.random.random((MATRIX, MATRIX), dtype=cp.float32)
    out = cp.empty_like(a)

    def busy_once() -> None:
        for _ in range(8):
            cp.matmul(a, b, out=out)

    sync = _synchronize(cp)
    busy_once()
    sync()  # cuBLAS set-up out of the measurement
    with nvml_reader(pci_bus_id(cp, device), device) as nvml:
        if nvml.reason is not None:
            raise EnergyUnavailable(nvml.reason)
        return measure(nvml, busy_once, sync, seconds=seconds)


def _synchronize(cp: ModuleType) -> Callable[[], None]:
    return lambda: cp.cuda.Device().synchronize()


def main(argv: Sequence[str] | None = None,
         check: Callable[[int, float], EnergyCheck] = run_energy_check) -> int:
    """Write the check's JSON: status ok with the figures, skipped without a GPU (exit
    0, as `zerohop microbench`), failed when the counter is missing (exit 1)."""
    parser = argparse.ArgumentParser(prog="python -m zerohop.microbench.energy_check")
    parser.add_argument("out", type=Path)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--device", type=int, default=0)
    args = parser.parse_args(argv)
    reason = cuda_unavailable_reason(args.device)
    document: dict[str, object]
    if reason is not None:
        document = {"status": "skipped", "reason": f"no CUDA device found: {reason}"}
    else:
        try:
            document = {"status": "ok", **asdict(check(args.device, args.seconds))}
        except (EnergyUnavailable, NoCudaDevice) as exc:
            document = {"status": "failed", "reason": str(exc)}
    args.out.write_text(json.dumps(document, indent=2) + "\n")
    print(json.dumps(document))
    return 1 if document["status"] == "failed" else 0


if __name__ == "__main__":
    raise SystemExit(main())
