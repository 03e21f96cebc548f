"""The PCIe link limit formula."""

from __future__ import annotations

import pytest

from zerohop.microbench.pcie_limit import link_limit, pct_of_link, theoretical_gbps_per_direction

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("gen", "width", "expected"),
    [
        (1, 16, 4.0),
        (2, 16, 8.0),
        (3, 16, 8 * 128 / 130 * 2),  # 15.75
        (4, 16, 16 * 128 / 130 * 2),  # 31.5
        (5, 16, 32 * 128 / 130 * 2),  # 63.0
        (5, 8, 32 * 128 / 130),
        (6, 16, 64 * 242 / 256 * 2),  # 121.0
        (4, 1, 16 * 128 / 130 / 8),
    ],
)
def test_limit_per_generation_and_width(gen: int, width: int, expected: float) -> None:
    assert theoretical_gbps_per_direction(gen, width) == pytest.approx(expected)


def test_gen5_x16_is_the_schema_example() -> None:
    assert round(theoretical_gbps_per_direction(5, 16), 1) == 63.0


@pytest.mark.parametrize(("gen", "width"), [(0, 16), (9, 16), (5, 3), (5, 0)])
def test_impossible_links_are_refused(gen: int, width: int) -> None:
    with pytest.raises(ValueError, match="PCIe"):
        theoretical_gbps_per_direction(gen, width)


def test_link_limit_explains_missing_or_odd_values() -> None:
    assert link_limit(5, 16)[1] is None
    limit, note = link_limit(None, 16)
    assert limit is None and note and "not reported" in note
    limit, note = link_limit(5, 3)
    assert limit is None and note and "NVML reported Gen5 x3" in note


def test_pct_of_link() -> None:
    assert pct_of_link(55.0, 63.0) == pytest.approx(87.30, abs=0.01)
    assert pct_of_link(55.0, None) is None
    assert pct_of_link(55.0, 0.0) is None
