"""The theoretical per-direction bandwidth of a PCIe link, from its generation and width.

Formula (GB/s = 1e9 B/s, per direction):

    limit = transfer rate (GT/s per lane) × encoding efficiency × lanes / 8 bits

| gen | GT/s | line code / framing           | efficiency | per lane GB/s | x16 GB/s |
|-----|------|-------------------------------|------------|---------------|----------|
| 1   | 2.5  | 8b/10b                        | 0.8        | 0.250         | 4.0      |
| 2   | 5    | 8b/10b                        | 0.8        | 0.500         | 8.0      |
| 3   | 8    | 128b/130b                     | 128/130    | 0.985         | 15.75    |
| 4   | 16   | 128b/130b                     | 128/130    | 1.969         | 31.5     |
| 5   | 32   | 128b/130b                     | 128/130    | 3.938         | 63.0     |
| 6   | 64   | PAM4, 256-B FLIT, 242 B data  | 242/256    | 7.563         | 121.0    |
| 7   | 128  | PAM4, 256-B FLIT, 242 B data  | 242/256    | 15.125        | 242.0    |

Gen 6 and 7 run in FLIT mode: every 256-byte FLIT carries 236 bytes of TLPs and 6 of
data-link payload (242), the rest being CRC (8) and FEC (6). This is the physical layer's
limit; TLP headers, acknowledgements and flow-control updates take a further share, so
well-behaved DMA reaches roughly 85-93% of it on large transfers.
"""

from __future__ import annotations

from typing import NamedTuple


class LaneRate(NamedTuple):
    gt_per_s: float
    efficiency: float
    encoding: str


LANE_RATES: dict[int, LaneRate] = {
    1: LaneRate(2.5, 8 / 10, "8b/10b"),
    2: LaneRate(5.0, 8 / 10, "8b/10b"),
    3: LaneRate(8.0, 128 / 130, "128b/130b"),
    4: LaneRate(16.0, 128 / 130, "128b/130b"),
    5: LaneRate(32.0, 128 / 130, "128b/130b"),
    6: LaneRate(64.0, 242 / 256, "FLIT 242/256"),
    7: LaneRate(128.0, 242 / 256, "FLIT 242/256"),
}
LINK_WIDTHS = (1, 2, 4, 8, 12, 16, 32)


def theoretical_gbps_per_direction(gen: int, width: int) -> float:
    """Per-direction limit in GB/s of a Gen`gen` x`width` link (see the module table)."""
    rate = LANE_RATES.get(gen)
    if rate is None:
        raise ValueError(f"unknown PCIe generation {gen!r}; known: {sorted(LANE_RATES)}")
    if width not in LINK_WIDTHS:
        raise ValueError(f"unusual PCIe link width x{width!r}; expected one of {LINK_WIDTHS}")
    return rate.gt_per_s * rate.efficiency * width / 8.0


def link_limit(gen: int | None, width: int | None) -> tuple[float | None, str | None]:
    """The limit, or None with a note saying why (NVML missing or reporting a value no
    physical link has, as some virtual machines do)."""
    if gen is None or width is None:
        return None, "PCIe generation/width not reported by NVML"
    try:
        return theoretical_gbps_per_direction(gen, width), None
    except ValueError as exc:
        return None, f"NVML reported Gen{gen} x{width}: {exc}"


def pct_of_link(measured_gbps: float, limit_gbps: float | None) -> float | None:
    if limit_gbps is None or limit_gbps <= 0:
        return None
    return 100.0 * measured_gbps / limit_gbps
