"""The live progress line reads the record sinks' files as they grow: every whole line
counted once, outcomes counted from the bytes, TTFT from the newest lines."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from zerohop.core import json_codec
from zerohop.core.layout import RECORDS_DIR
from zerohop.runner.progress import TTFT_SAMPLE_LINES, _line, _read_new

pytestmark = pytest.mark.unit


def _rows(n: int, *, ttft_ms: float, error_every: int = 0) -> bytes:
    rows = []
    for i in range(n):
        failed = error_every and i % error_every == 0
        rows.append({"request_id": f"r{i}", "outcome": "http_error" if failed else "ok",
                     "ttft_ms": None if failed else ttft_ms, "error": "said \"ok\""})
    return b"".join(json_codec.dumps(row) + b"\n" for row in rows)


def test_lines_are_counted_once_and_a_partial_line_waits(tmp_path: Path) -> None:
    records = tmp_path / RECORDS_DIR
    records.mkdir()
    sink = records / "main.jsonl"
    offsets: dict[Path, int] = {}
    counts = {"requests": 0, "errors": 0}
    ttfts: list[float] = []
    first = _rows(1000, ttft_ms=40.0, error_every=10)
    sink.write_bytes(first + b'{"request_id": "half')  # the writer is mid-line
    _read_new(tmp_path, offsets, counts, ttfts)
    assert counts == {"requests": 1000, "errors": 100}
    assert len(ttfts) == TTFT_SAMPLE_LINES * 9 // 10  # the newest lines only
    assert set(ttfts) == {40.0}
    sink.write_bytes(first + _rows(300, ttft_ms=90.0))  # the line finished, more came
    _read_new(tmp_path, offsets, counts, ttfts)
    assert counts == {"requests": 1300, "errors": 100}
    assert "requests    1300" in _line(10.0, 60.0, counts, ttfts)


def test_the_p50_is_the_reports_percentile() -> None:
    """The line's p50 is `analysis.quantiles.describe`'s (linear interpolation: the mean
    of the two middle values of an even count), not the upper middle value."""
    from zerohop.analysis.quantiles import describe

    counts = {"requests": 4, "errors": 0}
    ttfts = [40.0, 10.0, 30.0, 20.0]
    assert describe(np.asarray(ttfts)).get("p50") == 25.0
    assert "TTFT p50     25.0 ms" in _line(10.0, 60.0, counts, ttfts)
    # no TTFT yet, or none at all (embeddings, rerank): a dash, never "nan"
    empty = _line(10.0, 60.0, counts, [])
    assert "TTFT p50        -" in empty and "nan" not in empty, empty
