"""The modelled GPU gauges of one engine, for its /metrics: derived from the steps the
engine ran (how long each was busy, how much of it was compute, what it moved over
PCIe), since a simulated engine has no device to read."""

from __future__ import annotations

import math

from zerohop.sim.profiles import GpuProfile


class GpuActivity:
    """Modelled device telemetry: busy fraction, compute share and PCIe traffic as
    exponentially weighted rates (1 s), temperature as a first-order lag (20 s)."""

    TAU_S = 1.0
    THERMAL_TAU_S = 20.0
    AMBIENT_C = 30.0

    def __init__(self, gpu: GpuProfile, now_ns: int) -> None:
        self.gpu = gpu
        self.busy = 0.0
        self.compute_share = 0.0
        self.pcie_rx_bps = 0.0
        self.pcie_tx_bps = 0.0
        self.temp_c = self.AMBIENT_C + 0.08 * gpu.idle_w
        self._last_ns = now_ns
        self._thermal_ns = now_ns

    def record(
        self, now_ns: int, busy_s: float, compute_s: float, rx_bytes: float, tx_bytes: float
    ) -> None:
        dt = max((now_ns - self._last_ns) / 1e9, 1e-6)
        self._last_ns = now_ns
        alpha = 1.0 - math.exp(-dt / self.TAU_S)
        self.busy += (min(busy_s / dt, 1.0) - self.busy) * alpha
        share = compute_s / busy_s if busy_s > 0 else 0.0
        self.compute_share += (share - self.compute_share) * alpha
        self.pcie_rx_bps += (rx_bytes / dt - self.pcie_rx_bps) * alpha
        self.pcie_tx_bps += (tx_bytes / dt - self.pcie_tx_bps) * alpha

    def sample(self, now_ns: int) -> dict[str, float]:
        """Current gauges (decays the rates over idle time first)."""
        if now_ns - self._last_ns > 1_000_000:
            self.record(now_ns, 0.0, 0.0, 0.0, 0.0)
        power = self.gpu.idle_w + (self.gpu.tdp_w - self.gpu.idle_w) * self.busy * (
            0.55 + 0.45 * self.compute_share
        )
        dt = (now_ns - self._thermal_ns) / 1e9
        self._thermal_ns = now_ns
        steady = self.AMBIENT_C + 0.08 * power * (700.0 / max(self.gpu.tdp_w, 1.0)) ** 0.5
        self.temp_c += (steady - self.temp_c) * (1.0 - math.exp(-dt / self.THERMAL_TAU_S))
        busy = self.busy > 0.02
        return {
            "util_pct": 100.0 * self.busy,
            "power_w": power,
            "temp_c": self.temp_c,
            "sm_clock_mhz": float(
                self.gpu.sm_clock_max_mhz if busy else self.gpu.sm_clock_idle_mhz
            ),
            "pcie_rx_bps": self.pcie_rx_bps,
            "pcie_tx_bps": self.pcie_tx_bps,
        }
