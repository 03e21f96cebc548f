"""The modelled GPU gauges of one engine, for its /metrics: derived from the steps the
engine ran (how long each was busy, how much of it was compute, what it moved over
PCIe), since a simulated engine has no device to read.

Board power follows the busy fraction and compute share; the energy counter is that
power's exact integral over the caller's clock (real time in the server, the virtual
clock in `zerohop simulate`): between two records the rates relax exponentially
towards the interval's targets, so the integral has a closed form and the counter
does not depend on how often it is read."""

from __future__ import annotations

import math

from zerohop.sim.cost_model.profiles import GpuProfile


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
        self.energy_j = 0.0  # modelled board energy since the engine started
        self._last_ns = now_ns
        self._thermal_ns = now_ns

    def record(
        self, now_ns: int, busy_s: float, compute_s: float, rx_bytes: float, tx_bytes: float
    ) -> None:
        now_ns = max(now_ns, self._last_ns)  # a step ending before a read: no time back
        span_s = (now_ns - self._last_ns) / 1e9
        dt = max(span_s, 1e-6)
        self._last_ns = now_ns
        alpha = 1.0 - math.exp(-dt / self.TAU_S)
        target = min(busy_s / dt, 1.0)
        share = compute_s / busy_s if busy_s > 0 else 0.0
        self.energy_j += self._energy_over(span_s, target, share)
        self.busy += (target - self.busy) * alpha
        self.compute_share += (share - self.compute_share) * alpha
        self.pcie_rx_bps += (rx_bytes / dt - self.pcie_rx_bps) * alpha
        self.pcie_tx_bps += (tx_bytes / dt - self.pcie_tx_bps) * alpha

    def sample(self, now_ns: int) -> dict[str, float]:
        """Current gauges (decays the rates over idle time first)."""
        if now_ns - self._last_ns > 1_000_000:
            self.record(now_ns, 0.0, 0.0, 0.0, 0.0)
        power = self._power(self.busy, self.compute_share)
        # the < 1 ms since the last record, as idle: a later step only adds to it
        energy_j = self.energy_j + self._energy_over(
            max(now_ns - self._last_ns, 0) / 1e9, 0.0, 0.0)
        dt = (now_ns - self._thermal_ns) / 1e9
        self._thermal_ns = now_ns
        steady = self.AMBIENT_C + 0.08 * power * (700.0 / max(self.gpu.tdp_w, 1.0)) ** 0.5
        self.temp_c += (steady - self.temp_c) * (1.0 - math.exp(-dt / self.THERMAL_TAU_S))
        busy = self.busy > 0.02
        return {
            "util_pct": 100.0 * self.busy,
            "power_w": power,
            "energy_j": energy_j,
            "temp_c": self.temp_c,
            "sm_clock_mhz": float(
                self.gpu.sm_clock_max_mhz if busy else self.gpu.sm_clock_idle_mhz
            ),
            "pcie_rx_bps": self.pcie_rx_bps,
            "pcie_tx_bps": self.pcie_tx_bps,
        }

    def _power(self, busy: float, compute_share: float) -> float:
        """Board power, W: idle plus the busy share of the span to TDP, compute-bound
        work drawing more than memory-bound."""
        return self.gpu.idle_w + (self.gpu.tdp_w - self.gpu.idle_w) * busy * (
            0.55 + 0.45 * compute_share
        )

    def _energy_over(self, span_s: float, busy_target: float, share_target: float) -> float:
        """∫ power dt over `span_s` while busy and share relax from their current values
        towards the targets: B(t) = b + (b0 - b)·e^(-t/τ), S(t) likewise, and power is
        idle + R·(0.55·B + 0.45·B·S), each term integrable in closed form."""
        if span_s <= 0.0:
            return 0.0
        b, db = busy_target, self.busy - busy_target
        s, ds = share_target, self.compute_share - share_target
        tau = self.TAU_S
        first = tau * -math.expm1(-span_s / tau)  # ∫ e^(-t/τ)
        second = tau / 2.0 * -math.expm1(-2.0 * span_s / tau)  # ∫ e^(-2t/τ)
        busy_integral = b * span_s + db * first
        product_integral = b * s * span_s + (b * ds + s * db) * first + db * ds * second
        swing = self.gpu.tdp_w - self.gpu.idle_w
        return self.gpu.idle_w * span_s + swing * (
            0.55 * busy_integral + 0.45 * product_integral
        )
