"""The one-per-process stream reader, under real gevent (in a child process)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def test_reactor_reads_many_streams_and_enforces_their_deadlines() -> None:
    script = Path(__file__).with_name("reactor_scenarios.py")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=60, check=True)
    data = json.loads(out.stdout)
    ends = Counter(r["end"] for r in data["results"])
    assert ends == {"complete": 20, "stall": 1, "eof": 1}, ends
    complete = [r for r in data["results"] if r["end"] == "complete"]
    for r in complete:
        assert r["payload"] == "".join(f"data: {i}\n\n" for i in range(5))
        assert r["reusable"]
        # tokens were 20 ms apart on the server: stamps keep them apart (no batching)
        assert min(r["gaps_ms"][1:]) > 10
    assert data["elapsed_s"] < 3  # concurrent, not one stream after another
