"""Workload spec validation: shipped files load, malformed ones name the field."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.workloads.conftest import TRACES_DIR, WORKLOADS_DIR, trace_path
from zerohop.workloads import reference
from zerohop.workloads.errors import WorkloadError
from zerohop.workloads.kind_registry import workload_kinds
from zerohop.workloads.schema.data_paths import package_data_dir
from zerohop.workloads.schema.distributions import FixedDist
from zerohop.workloads.schema.kinds import (
    LoraMixSpec,
    ShortQueryFloodSpec,
    TraceReplaySpec,
)
from zerohop.workloads.schema.load_spec import (
    ClosedLoad,
    GammaArrival,
    OpenLoad,
    PoissonArrival,
    SpikeShape,
)
from zerohop.workloads.yaml_io import load_workload_file, parse_workloads

pytestmark = pytest.mark.unit

SHIPPED = sorted(WORKLOADS_DIR.glob("*.yaml"))


def test_the_repository_ships_the_documented_files() -> None:
    names = {p.name for p in SHIPPED}
    assert {
        "short_query_flood.yaml",
        "long_context.yaml",
        "lora_mix.yaml",
        "trace_replay_azure_conv.yaml",
    } <= names


def _traces_named_in(path: Path) -> set[str]:
    """The file names of the public traces a workload file replays (its `trace:` fields),
    read from the YAML itself so that a missing trace skips only the files that need it.
    A trace that ships in the package (`${ZEROHOP_DATA}`) is not one of them."""
    data = yaml.safe_load(path.read_text())
    entries = data.get("workloads", [data]) if isinstance(data, dict) else []
    return {Path(str(e["trace"])).name for e in entries if isinstance(e, dict)
            and "trace" in e and not str(e["trace"]).startswith("${ZEROHOP_DATA}")}


@pytest.mark.parametrize("path", SHIPPED, ids=[p.name for p in SHIPPED])
def test_every_shipped_workload_file_loads(
    path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    needed = _traces_named_in(path)
    for name in sorted(needed):
        trace_path(name)  # skips, naming the trace, where it is missing
    # a file that names no trace must load with no trace folder at all
    monkeypatch.setenv("ZEROHOP_TRACES", str(TRACES_DIR if needed else tmp_path / "no-traces"))
    loaded = load_workload_file(path)
    assert loaded.workloads
    replays = [spec for spec in loaded.workloads if isinstance(spec, TraceReplaySpec)]
    shipped = [spec for spec in replays if spec.trace.is_relative_to(package_data_dir())]
    assert {spec.trace.name for spec in replays if spec not in shipped} == needed
    for spec in loaded.workloads:
        assert spec.kind in {kind.name for kind in workload_kinds()}
    for spec in replays:
        if spec not in shipped:
            assert spec.trace == (TRACES_DIR / spec.trace.name).resolve()
        assert spec.trace.is_file()


def test_no_workload_file_reads_outside_the_repository_or_the_package() -> None:
    """A user's clone has nothing beside it: no shipped file may default to a path
    outside its own tree (such as ../shared), only to ${ZEROHOP_DATA} or a variable."""
    for path in SHIPPED:
        assert "../" not in path.read_text(), path


def test_the_default_trace_replay_ships_its_own_trace(monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path: Path) -> None:
    """A fresh clone or install, with no public traces anywhere, still replays real
    arrivals: the default TraceReplay reads the slice in the package."""
    monkeypatch.setenv("ZEROHOP_TRACES", str(tmp_path / "no-traces"))
    monkeypatch.delenv("ZEROHOP_DATA", raising=False)
    spec: Any = load_workload_file(WORKLOADS_DIR / "trace_replay_azure_conv.yaml").workloads[0]
    assert spec.trace == (package_data_dir() / "traces" / "azure_conv_first3600.csv").resolve()
    assert spec.trace.is_file()


def test_env_variable_overrides_the_trace_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "mine.csv").write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n")
    monkeypatch.setenv("MY_TRACES", str(tmp_path))
    data = {"kind": "trace_replay", "name": "t", "trace": "${MY_TRACES}/mine.csv"}
    spec: Any = parse_workloads(data).workloads[0]
    assert spec.trace == (tmp_path / "mine.csv").resolve()
    assert spec.resolved_format == "azure_csv"


def test_relative_trace_paths_resolve_against_the_yaml_folder(tmp_path: Path) -> None:
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "t.jsonl").write_text('{"timestamp": 0, "input_length": 5, '
                                                 '"output_length": 2, "hash_ids": [1]}\n')
    yaml_file = tmp_path / "w.yaml"
    yaml_file.write_text("kind: trace_replay\nname: t\ntrace: traces/t.jsonl\n")
    spec: Any = load_workload_file(yaml_file).workloads[0]
    assert spec.trace == (tmp_path / "traces" / "t.jsonl").resolve()
    assert spec.resolved_format == "mooncake_jsonl"


def test_shorthands_and_defaults() -> None:
    spec = parse_workloads(
        {
            "kind": "short_query_flood",
            "name": "s",
            "max_tokens": 8,
            "load": {"kind": "open", "rate_rps": 5, "arrival": "poisson",
                     "shape": {"type": "spike", "peak_multiplier": 4, "at_s": 1,
                               "duration_s": 2}},
        }
    ).workloads[0]
    assert isinstance(spec, ShortQueryFloodSpec)
    assert spec.max_tokens == FixedDist(type="fixed", value=8)
    assert isinstance(spec.load, OpenLoad)
    assert isinstance(spec.load.arrival, PoissonArrival)
    assert isinstance(spec.load.shape, SpikeShape)
    lora = parse_workloads({"kind": "lora_mix", "name": "l", "adapters": ["a", "b"]}).workloads[0]
    assert isinstance(lora, LoraMixSpec)
    assert lora.adapters.resolved_names() == ["a", "b"]
    counted: Any = parse_workloads(
        {"kind": "lora_mix", "name": "l", "adapters": {"count": 3, "prefix": "x"}}
    ).workloads[0]
    assert counted.adapters.resolved_names() == ["x0", "x1", "x2"]
    assert isinstance(parse_workloads({"kind": "long_context", "name": "x"}).workloads[0].load,
                      ClosedLoad)


def test_gamma_arrival_keeps_its_cv() -> None:
    spec: Any = parse_workloads(
        {"kind": "short_query_flood", "name": "s",
         "load": {"kind": "open", "rate_rps": 5, "arrival": {"type": "gamma", "cv": 3}}}
    ).workloads[0]
    assert spec.load.arrival == GammaArrival(type="gamma", cv=3)


def _flood(**extra: Any) -> dict[str, Any]:
    return {"kind": "short_query_flood", "name": "flood", **extra}


_SHAREGPT = str(TRACES_DIR / "ShareGPT_V3_filtered_500.json")

MALFORMED: list[tuple[str, Any, str, str]] = [
    # (case id, data, expected field path, expected message fragment)
    ("rate_zero",
     {"workloads": [_flood(), _flood(name="b", load={"kind": "open", "rate_rps": 0})]},
     "workloads[1].load.rate_rps", "must be > 0"),
    ("negative_max_tokens", _flood(max_tokens=-3), "max_tokens", "must be > 0"),
    ("uniform_min_above_max", _flood(input_tokens={"type": "uniform", "min": 9, "max": 2}),
     "input_tokens", "min (9) must be <= max (2)"),
    ("unknown_distribution", _flood(input_tokens={"type": "zipf", "value": 3}),
     "input_tokens.type", "unknown value 'zipf'"),
    ("unknown_arrival",
     _flood(load={"kind": "open", "rate_rps": 1, "arrival": "gama"}),
     "load.arrival", "unknown value 'gama'"),
    ("gamma_cv_negative",
     _flood(load={"kind": "open", "rate_rps": 1, "arrival": {"type": "gamma", "cv": -1}}),
     "load.arrival.cv", "must be > 0"),
    ("unknown_load_kind", _flood(load={"kind": "burst"}), "load.kind", "unknown value 'burst'"),
    ("trace_load_on_flood", _flood(load={"kind": "trace"}), "load.kind",
     "unknown value 'trace'"),
    ("zero_users", _flood(load={"kind": "closed", "users": 0}), "load.users", "must be > 0"),
    ("cap_zero", _flood(load={"kind": "open", "rate_rps": 1, "max_in_flight": 0}),
     "load.max_in_flight", "must be > 0"),
    ("steps_out_of_order",
     _flood(load={"kind": "open", "rate_rps": 1, "shape": {"type": "step", "steps": [
         {"at_s": 5, "multiplier": 1}, {"at_s": 2, "multiplier": 2}]}}),
     "load.shape.steps", "strictly increasing"),
    ("spike_without_duration",
     _flood(load={"kind": "open", "rate_rps": 1,
                  "shape": {"type": "spike", "peak_multiplier": 4, "at_s": 3}}),
     "load.shape.duration_s", "required"),
    ("unknown_field", _flood(max_token=5), "max_token", "unknown field"),
    ("missing_kind", {"name": "x"}, "kind", "required"),
    ("unknown_kind", {"kind": "flood", "name": "x"}, "kind", "unknown value 'flood'"),
    ("bad_name", _flood(name="has space"), "name", "pattern"),
    ("weight_zero", _flood(weight=0), "weight", "must be > 0"),
    ("bad_api", _flood(api="grpc"), "api", "must be one of"),
    ("slo_negative", _flood(slo={"ttft_ms": -1}), "slo.ttft_ms", "must be > 0"),
    ("policy_is_reserved", _flood(policy={"retries": 3}), "policy.retries", "unknown field"),
    ("token_ids_need_completions", _flood(prompt_format="token_ids"), "prompt_format",
     "needs api: openai-completions"),
    ("lora_without_adapters", {"kind": "lora_mix", "name": "l"}, "adapters", "required"),
    ("lora_duplicate_adapters", {"kind": "lora_mix", "name": "l", "adapters": ["a", "a"]},
     "adapters", "unique"),
    ("lora_share_one", {"kind": "lora_mix", "name": "l", "adapters": ["a"],
                        "base_model_share": 1}, "base_model_share", "must be < 1"),
    ("long_context_takes_no_input_tokens", {"kind": "long_context", "name": "l",
                                            "input_tokens": 100}, "input_tokens",
     "unknown field"),
    ("long_context_document_too_small", {"kind": "long_context", "name": "l",
                                         "document_tokens": 10}, "document_tokens", ">= 256"),
    ("trace_missing_file", {"kind": "trace_replay", "name": "t", "trace": "/nope/x.csv"},
     "trace", "trace file not found"),
    ("trace_unset_env", {"kind": "trace_replay", "name": "t",
                         "trace": "${ZEROHOP_SURELY_UNSET_VAR}/x.csv"}, "trace",
     "ZEROHOP_SURELY_UNSET_VAR is not set"),
    ("trace_speed_zero", {"kind": "trace_replay", "name": "t", "trace": _SHAREGPT,
                          "speed": 0, "load": {"kind": "closed"}}, "speed", "must be > 0"),
    ("sharegpt_needs_arrivals", {"kind": "trace_replay", "name": "t", "trace": _SHAREGPT},
     "load", "no timestamps"),
    ("prefix_blocks_need_mooncake", {"kind": "trace_replay", "name": "t", "trace": _SHAREGPT,
                                     "use_prefix_blocks": True, "load": {"kind": "closed"}},
     "use_prefix_blocks", "mooncake_jsonl"),
    ("duplicate_names", {"workloads": [_flood(), _flood()]}, "workloads",
     "duplicate workload name 'flood' (workloads[0] and workloads[1])"),
    ("empty_list", {"workloads": []}, "workloads", "at least 1"),
]


@pytest.mark.parametrize(
    ("data", "path", "fragment"),
    [case[1:] for case in MALFORMED],
    ids=[case[0] for case in MALFORMED],
)
def test_malformed_specs_name_the_field(data: Any, path: str, fragment: str) -> None:
    if _SHAREGPT in str(data):
        trace_path(Path(_SHAREGPT).name)  # skips, naming the trace, where it is missing
    with pytest.raises(WorkloadError) as caught:
        parse_workloads(data, source="w.yaml")
    message = str(caught.value)
    assert message.startswith(f"w.yaml: {path}: "), message
    assert fragment in message, message
    assert "\n" not in message  # one line, one error


def test_error_messages_name_every_mistake() -> None:
    with pytest.raises(WorkloadError) as caught:
        parse_workloads(_flood(weight=0, temperature=-1))
    message = str(caught.value)
    assert "weight: must be > 0 (got 0)" in message and "temperature: must be >= 0" in message
    assert "\n" not in message and "more error" not in message


def test_file_level_errors_name_the_file_and_line(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text(textwrap.dedent("""\
        kind: short_query_flood
        name: x
        load: {kind: open, rate_rps: 3
        """))
    with pytest.raises(WorkloadError, match=r"broken\.yaml: line \d+, column \d+: invalid YAML"):
        load_workload_file(broken)
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing\n")
    with pytest.raises(WorkloadError, match=r"empty\.yaml: empty workload file"):
        load_workload_file(empty)
    listing = tmp_path / "list.yaml"
    listing.write_text("- kind: short_query_flood\n")
    with pytest.raises(WorkloadError, match=r"list\.yaml: expected a mapping"):
        load_workload_file(listing)
    with pytest.raises(WorkloadError, match=r"missing\.yaml: cannot read"):
        load_workload_file(tmp_path / "missing.yaml")


def test_validated_specs_are_frozen() -> None:
    spec = parse_workloads(_flood()).workloads[0]
    with pytest.raises(ValueError, match="frozen"):
        spec.weight = 3


def test_lookup_by_name() -> None:
    loaded = parse_workloads({"workloads": [_flood(), {"kind": "lora_mix", "name": "l",
                                                       "adapters": ["a"]}]})
    assert loaded.by_name("l").kind == "lora_mix"
    with pytest.raises(KeyError, match="have: flood, l"):
        loaded.by_name("nope")


def test_slo_request_check() -> None:
    slo = parse_workloads(_flood(slo={"ttft_ms": 100, "e2e_ms": 1000})).workloads[0].slo
    assert slo.request_meets(ttft_ms=99, tpot_ms=None, e2e_ms=1000)
    assert not slo.request_meets(ttft_ms=101, tpot_ms=None, e2e_ms=10)
    assert not slo.request_meets(ttft_ms=1, tpot_ms=5, e2e_ms=1001)


def test_every_field_has_a_description() -> None:
    for _title, models in reference._SECTIONS:
        for model in models:
            for row in reference.field_rows(model):
                assert row.description, f"{row.model}.{row.name} has no description"


def test_readme_field_reference_is_current() -> None:
    readme = (WORKLOADS_DIR / "README.md").read_text(encoding="utf-8")
    assert reference.embed_reference(readme) == readme, (
        "workloads/README.md is stale: run python -m zerohop.workloads.reference"
    )
