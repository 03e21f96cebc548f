"""Config loading: strict, with errors that name the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from zerohop.sim.config import ConfigError, load_config

pytestmark = pytest.mark.unit


def test_defaults_serve_one_h100_llama3_8b() -> None:
    config = load_config(None, {})
    assert len(config.models) == 1
    assert config.models[0].served_name() == "meta-llama/Meta-Llama-3-8B-Instruct"


def test_yaml_with_models_lora_and_faults(tmp_path: Path) -> None:
    path = tmp_path / "sim.yaml"
    path.write_text(
        "seed: 3\nmax_queue: 5\n"
        "models:\n"
        "  - {name: big, model: llama-3-70b, tp: 4}\n"
        "  - name: small\n    model: llama-3.2-1b\n    lora: {adapters: [sql], max_loras: 1}\n"
        "faults:\n  stall_mid: {probability: 0.1, after: 2, s: 0.5}\n"
    )
    config = load_config(path, {"port": 0})
    assert [m.served_name() for m in config.models] == ["big", "small"]
    assert config.models[1].lora.adapters[0].name == "sql"
    assert config.faults["stall_mid"].probability == 0.1


@pytest.mark.parametrize(
    ("yaml_text", "needle"),
    [
        ("colour: red\n", "colour"),
        ("models:\n  - {gpu: tpu-v9}\n", "unknown gpu 'tpu-v9'"),
        ("models:\n  - {engine: {max_num_seqs: 0}}\n", "models.0.engine.max_num_seqs"),
        ("faults:\n  explode: {probability: 0.1}\n", "unknown fault 'explode'"),
        ("faults:\n  stall_mid: {probability: 0.1, secs: 2}\n", "no parameter 'secs'"),
        ("models:\n  - {name: a}\n  - {name: a}\n", "used twice"),
    ],
)
def test_errors_name_the_field(tmp_path: Path, yaml_text: str, needle: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml_text)
    with pytest.raises(ConfigError, match=needle):
        load_config(path, {})


def test_model_flags_conflict_with_several_models(tmp_path: Path) -> None:
    path = tmp_path / "two.yaml"
    path.write_text("models:\n  - {name: a}\n  - {name: b, model: mistral-7b}\n")
    with pytest.raises(ConfigError, match="single model"):
        load_config(path, {"gpu": "h200"})
    config = load_config(None, {"gpu": "h200", "max_num_seqs": 8, "time_scale": 2.0})
    assert config.models[0].gpu == "h200"
    assert config.models[0].engine.max_num_seqs == 8
