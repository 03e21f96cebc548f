"""Trace readers: the public files, timestamp precision, malformed input, the window."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.workloads.conftest import trace_path
from zerohop.workloads.errors import WorkloadError
from zerohop.workloads.timing.traces import (
    TraceRequest,
    read_azure_csv,
    read_mooncake_jsonl,
    read_sharegpt_json,
    read_trace,
    replay_window,
    speed_for_rate,
)

pytestmark = pytest.mark.unit


def test_azure_conv_trace_matches_its_documented_statistics() -> None:
    rows = read_trace(trace_path("AzureLLMInferenceTrace_conv.csv"))
    assert len(rows) == 19_366
    assert rows[0].offset_s == 0.0
    assert rows[-1].offset_s == pytest.approx(3501.72, abs=0.01)  # 18:15:46.68 → 19:14:08.40
    inputs = np.array([r.input_tokens for r in rows])
    outputs = np.array([r.output_tokens for r in rows])
    assert inputs.mean() == pytest.approx(1155, abs=1) and inputs.max() == 14_050
    assert outputs.mean() == pytest.approx(211, abs=1) and outputs.max() == 1_000
    assert rows[1].offset_s == pytest.approx(50.9951690 - 46.6805900)  # all 7 digits


def test_azure_code_trace_reads() -> None:
    rows = read_trace(trace_path("AzureLLMInferenceTrace_code.csv"), "azure_csv")
    assert len(rows) == 8_819
    assert rows[-1].offset_s == pytest.approx(3435.95, abs=0.01)


def test_mooncake_trace_reads_with_its_prefix_blocks() -> None:
    rows = read_trace(trace_path("conversation_trace.jsonl"))
    assert len(rows) == 12_031
    assert rows[-1].offset_s == pytest.approx(3536.999)
    assert np.mean([r.input_tokens for r in rows]) == pytest.approx(12_035, abs=1)
    assert all(len(r.hash_ids) == -(-r.input_tokens // 512) for r in rows[:500])
    assert rows[0].prefix_group == rows[0].hash_ids[0]


def test_sharegpt_reads_prompts_without_timestamps() -> None:
    rows = read_trace(trace_path("ShareGPT_V3_filtered_500.json"))
    assert len(rows) == 500
    assert all(r.offset_s is None and r.output_tokens is None for r in rows)
    assert rows[0].input_tokens == 13  # "How to stop automatic updates from the WSUS ..."
    assert [r.row for r in rows[:3]] == [0, 1, 2]


def test_seven_fractional_digits_and_utc_offsets(tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.6805900,10,2\n"
        "2023-11-16 18:15:46.6805901,11,3\n"
        "2023-11-16 18:15:47,12,4\n"
        "2024-05-10 00:00:00.5+00:00,1,1\n"
    )
    rows: Any = read_azure_csv(path)
    assert rows[1].offset_s - rows[0].offset_s == pytest.approx(1e-7, abs=1e-10)
    assert rows[2].offset_s == pytest.approx(0.31941)
    assert rows[3].offset_s > 86400 * 170


def test_rows_are_sorted_by_time(tmp_path: Path) -> None:
    path = tmp_path / "b.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                    "2023-01-01 00:00:02.0,2,1\n2023-01-01 00:00:01.0,1,1\n")
    rows = read_azure_csv(path)
    assert [r.input_tokens for r in rows] == [1, 2]
    assert [r.row for r in rows] == [1, 0]


@pytest.mark.parametrize(
    ("name", "content", "fragment"),
    [
        ("h.csv", "time,in,out\n", "line 1: expected header"),
        ("t.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-01-01 00:00:00,1,1\n"
                  "yesterday,1,1\n", "line 3: TIMESTAMP 'yesterday'"),
        ("d.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-02-30 00:00:00,1,1\n",
         "line 2: TIMESTAMP"),
        ("c.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-01-01 00:00:00,many,1\n",
         "line 2: ContextTokens 'many' is not an integer"),
        ("n.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-01-01 00:00:00,5\n",
         "line 2: expected 3 columns"),
        ("j.jsonl", '{"timestamp": 0, "input_length": 1, "output_length": 1}\n{oops\n',
         "line 2: invalid JSON"),
        ("k.jsonl", '{"timestamp": "soon", "input_length": 1, "output_length": 1}\n',
         "line 1: timestamp must be a number"),
        ("m.jsonl", '{"timestamp": 0, "output_length": 1}\n',
         "line 1: input_length None is not an integer"),
        ("x.jsonl", '{"timestamp": 0, "input_length": 1, "output_length": -4}\n',
         "line 1: output_length must be >= 0"),
        ("s.json", '[{"conversations": [{"from": "human", "value": "hi"}]},\n 42]',
         "entry 1: expected a 'conversations' list"),
        ("v.json", '[{"conversations": [\n', "line 2: invalid JSON"),
        ("e.json", "[]", "the trace holds no requests"),
        ("trace.txt", "whatever", "cannot tell the trace format"),
    ],
)
def test_malformed_traces_name_file_and_line(
    tmp_path: Path, name: str, content: str, fragment: str
) -> None:
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(WorkloadError) as caught:
        read_trace(path)
    assert str(caught.value).startswith(f"{path}: ")
    assert fragment in str(caught.value)


def test_unreadable_trace(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError, match="cannot read trace"):
        read_trace(tmp_path / "absent.csv")
    with pytest.raises(WorkloadError, match="unknown trace format"):
        read_trace(tmp_path / "absent.csv", "parquet")


def test_sharegpt_answers_give_output_lengths(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text('[{"conversations": [{"from": "system", "value": "be nice"},'
                    '{"from": "human", "value": "Hello, world!"},'
                    '{"from": "gpt", "value": "Hi there."}]},'
                    '{"conversations": [{"from": "gpt", "value": "orphan"}]}]')
    rows = read_sharegpt_json(path)
    assert rows == [TraceRequest(None, 4, 3, row=0)]


def test_mooncake_reader_orders_by_timestamp(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text('{"timestamp": 2000, "input_length": 600, "output_length": 5, '
                    '"hash_ids": [3, 4]}\n\n'
                    '{"timestamp": 500, "input_length": 10, "output_length": 1, '
                    '"hash_ids": [3]}\n')
    rows = read_mooncake_jsonl(path)
    assert [(r.offset_s, r.input_tokens, r.prefix_group) for r in rows] == [
        (0.0, 10, 3), (1.5, 600, 3)]


def test_replay_window_scales_time_and_keeps_the_burst_shape() -> None:
    rows = [TraceRequest(float(t), 1, 1, row=i) for i, t in enumerate([0, 1, 1.5, 10, 20, 30])]
    window = replay_window(rows, speed=10, start_offset_s=1, duration_s=2)
    assert [r.offset_s for r in window] == pytest.approx([0.0, 0.05, 0.9, 1.9])
    assert [r.row for r in window] == [1, 2, 3, 4]
    assert len(replay_window(rows, max_requests=2)) == 2
    untimed = [TraceRequest(None, 1, 1, row=i) for i in range(5)]
    assert len(replay_window(untimed, speed=3, duration_s=1, max_requests=4)) == 4
    with pytest.raises(ValueError, match="speed"):
        replay_window(rows, speed=0)


def test_a_trace_is_time_scaled_to_offer_a_given_rate_with_its_shape_kept() -> None:
    """`--rate`'s share of a trace replay: the speed at which its window holds the share's
    arrivals, recounted here from the window that speed replays."""
    from zerohop.workloads.schema.data_paths import package_data_dir

    rows = read_trace(package_data_dir() / "traces" / "azure_conv_first3600.csv")
    for rate in (0.3, 2.5, 12.0):
        speed = speed_for_rate(rows, rate, duration_s=60.0)
        window = replay_window(rows, speed=speed, duration_s=60.0)
        assert len(window) == round(rate * 60.0), (rate, speed)
        # the shape kept: the same trace seconds, only their clock divided by `speed`
        assert [r.offset_s * speed for r in window] == pytest.approx(
            [r.offset_s for r in rows[:len(window)]])
    timed = [TraceRequest(float(t), 1, 1, row=i) for i in range(50) for t in [2 * i]]
    # 10 arrivals (0, 2, ... 18 s): the window ends at 19 s, halfway to the 11th
    assert speed_for_rate(timed, 0.5, duration_s=20.0) == pytest.approx(19 / 20)
    assert speed_for_rate(timed, 0.5) == pytest.approx(0.5 * 98 / 50)  # the mean rate
    # past the trace's end: extrapolated at its mean rate
    assert speed_for_rate(timed, 10.0, duration_s=10.0) == pytest.approx(98 * 100.5 / 50 / 10)
    with pytest.raises(ValueError, match="arrival times"):
        speed_for_rate([TraceRequest(None, 1, 1, row=i) for i in range(5)], 1.0)
