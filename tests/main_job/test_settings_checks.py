"""`RunSettings` checks itself: each value against its flag's bounds and the settings
that do not go together, one line naming the flag (`zerohop run` exits 2 with it), and
it survives plan.json's JSON as the same object."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from zerohop.loadgen.run_settings import RunSettings

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("given", "message"), [
    ({"users": 0}, "--users must be > 0"),
    ({"rate": -3.0}, "--rate must be > 0"),
    ({"workers": -1}, "--workers must be >= 0"),
    ({"requests": 0}, "--requests must be > 0"),
    ({"probe_prompt_tokens": 0}, "--probe-prompt-tokens must be >= 1"),
    ({"probe_idle": "soon"}, "--probe-idle: 'soon' is not like"),
    ({"selfcheck_duration": "later"}, "--selfcheck-duration: 'later'"),
    ({"duration": "0s"}, "--duration must be > 0"),
    ({"users": 2, "rate": 1.0}, "--users and --rate are exclusive"),
    ({"rate": 5.0, "max_concurrency": 1, "workers": 2}, "--max-concurrency must be >= --workers"),
    ({"host": "127.0.0.1:8000"}, "--host: '127.0.0.1:8000' is not an http:// URL"),
    ({"slo": "ttft_p99_ms"}, "--slo"),
])
def test_a_bad_setting_is_one_line_naming_its_flag(given: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message) as caught:
        RunSettings(**given).check()
    assert "\n" not in str(caught.value)


def test_the_worked_out_values_come_from_the_text_given() -> None:
    settings = RunSettings(duration="1m30s", probe_idle="2s", slo="ttft_p99_ms=500",
                           sim_args="--time-scale '4'")
    assert (settings.duration_s, settings.probe_idle_s) == (90.0, 2.0)
    assert settings.slo_targets == {"ttft_p99_ms": 500.0}
    assert settings.sim_argv == ["--time-scale", "4"]
    assert RunSettings(requests=10).duration_s == 24 * 3600.0  # the count ends the run
    assert RunSettings().duration_s == 30.0


def test_json_gives_back_the_same_settings() -> None:
    settings = RunSettings(workloads=(Path("a.yaml"), Path("b.yaml")), tokenizer=Path("tok"),
                           rate=2.5, routes=("round_robin",), results_dir=Path("out"))
    document = settings.to_json()
    assert document["workloads"] == ["a.yaml", "b.yaml"] and document["results_dir"] == "out"
    assert RunSettings.from_json(document) == settings
