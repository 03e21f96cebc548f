"""The pricing control's tail delay (`zerohop proxy --delay-ms D --delay-percent K`):
exactly K % of requests, spread evenly, so the delayed share is known, not drawn."""

from __future__ import annotations

import itertools

import pytest

from zerohop.proxy.proxy import LayerConfig, LayerProxy

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("percent, n, expected", [(10, 1000, 100), (5, 200, 10),
                                                  (0, 50, 0), (100, 7, 7), (2.5, 400, 10)])
def test_exactly_the_share_asked_is_delayed(percent: float, n: int, expected: int) -> None:
    proxy = LayerProxy(LayerConfig(upstreams=("http://127.0.0.1:9",), delay_ms=50,
                                   delay_percent=percent))
    picks = [proxy._delay_this_one() for _ in range(n)]
    assert sum(picks) == expected
    where = [i for i, p in enumerate(picks) if p]
    if len(where) > 1:  # spread evenly: delayed requests exactly 100/K apart
        gaps = {b - a for a, b in itertools.pairwise(where)}
        assert gaps == {round(100 / percent)}, gaps


@pytest.mark.parametrize("field, value", [("delay_percent", 101), ("delay_percent", -1),
                                          ("delay_ms", -5)])
def test_bad_delay_settings_are_refused(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field):
        LayerConfig(upstreams=("http://127.0.0.1:9",), **{field: value})
