"""llama.cpp's server `/metrics` (tools/server/server-task.cpp, `--metrics`) becomes the
canonical series (telemetry/canonical.py): the exposition is the one a llama-server built
from llama-cpp-python 0.3.36's sources wrote, its values changed between two scrapes."""

from __future__ import annotations

import pytest

from zerohop.telemetry.prometheus import PromDeriver, parse_exposition

pytestmark = pytest.mark.unit

SOURCE = "prom:127.0.0.1:8080"
COUNTERS = ("prompt_tokens_total", "prompt_tokens_cached_total", "prompt_seconds_total",
            "tokens_predicted_total", "tokens_predicted_seconds_total", "n_decode_total",
            "n_tokens_max", "spec_decode_num_draft_tokens_total",
            "spec_decode_num_accepted_tokens_total", "spec_decode_num_drafts_total")
GAUGES = ("prompt_tokens_seconds", "predicted_tokens_seconds", "requests_processing",
          "requests_deferred", "n_busy_slots_per_decode")


def exposition(values: dict[str, float]) -> str:
    """The server's text: HELP, TYPE and one unlabelled sample a series, counters first."""
    lines = []
    for kind, names in (("counter", COUNTERS), ("gauge", GAUGES)):
        for name in names:
            lines += [f"# HELP llamacpp:{name} (help)", f"# TYPE llamacpp:{name} {kind}",
                      f"llamacpp:{name} {values.get(name, 0)}"]
    return "\n".join(lines) + "\n"


def test_llamacpp_series_become_canonical_gauges_and_rates() -> None:
    deriver = PromDeriver(SOURCE)
    first = exposition({"prompt_tokens_total": 100, "tokens_predicted_total": 40,
                        "prompt_tokens_cached_total": 10, "requests_processing": 2})
    second = exposition({"prompt_tokens_total": 500, "tokens_predicted_total": 240,
                         "prompt_tokens_cached_total": 50, "requests_processing": 4,
                         "requests_deferred": 3, "spec_decode_num_draft_tokens_total": 60,
                         "spec_decode_num_accepted_tokens_total": 30,
                         "spec_decode_num_drafts_total": 20})
    early = {r.metric: r.value for r in deriver.feed(10.0, parse_exposition(first))
             if r.source == SOURCE}
    assert early == {"queue_depth": 0.0, "running_requests": 2.0}  # rates need two scrapes
    rows = {r.metric: r.value for r in deriver.feed(12.0, parse_exposition(second))
            if r.source == SOURCE}
    assert rows == {
        "queue_depth": 3.0,
        "running_requests": 4.0,
        "prompt_tokens_per_s": 200.0,
        "generation_tokens_per_s": 100.0,
        "prefix_cache_hit_tokens_per_s": 20.0,
        "spec_draft_tokens_per_s": 30.0,
        "spec_accepted_tokens_per_s": 15.0,
        "spec_drafts_per_s": 10.0,
    }
