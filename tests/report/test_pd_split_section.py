"""The prefill/decode split on the page: one row per workload, a p50 / p90 cell per
part, its texts escaped; no section without PD answers."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.synthetic_runs import HOSTILE
from zerohop.analysis.server.pd_split import pd_split
from zerohop.report.present_pd_split import pd_split_section
from zerohop.report.render import _environment, templates_dir

pytestmark = pytest.mark.unit

HEADER = ("prefill_queue;dur=1, prefill;dur=20, kv_transfer;dur=2, decode_queue;dur=0.5, "
          "first_decode;dur=7")


def test_one_row_per_workload_with_each_part_and_the_remainder() -> None:
    requests = pd.DataFrame({"workload": [HOSTILE] * 3, "outcome": ["ok"] * 3,
                             "ttft_ms": [31.0, 32.0, 33.0], "server_timing": [HEADER] * 3})
    section = pd_split_section(pd_split(requests))
    assert section is not None
    (row,) = section["rows"]
    assert section["columns"][2] == "KV transfer" and row["cells"][2] == "2.00 / 2.00"
    assert row["cells"][-1] == "1.50 / 2.30"  # remainders 0.5, 1.5, 2.5
    html = _environment(str(templates_dir())).get_template("_pd_split.html.j2").render(
        pd_split=section)
    assert HOSTILE not in html and "&lt;script&gt;" in html


def test_no_section_without_pd_answers() -> None:
    assert pd_split_section(None) is None
    plain = pd.DataFrame({"workload": ["w"], "outcome": ["ok"], "ttft_ms": [3.0],
                          "server_timing": ["layer;dur=1"]})
    assert pd_split_section(pd_split(plain)) is None
