"""The results folder: sinks survive kill -9, consolidation, manifest, secrets."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from zerohop.core.records import RECORD_FIELDS, RequestRecord
from zerohop.storage import run_folder as results


def _row(i: int, **kw: object) -> dict:
    r = RequestRecord(request_id=f"r{i}", workload="w", api="openai-chat", model="m",
                      outcome="ok", sent_ts=1000.0 + i, ttft_ms=1.5 * i, itl_ms=[1.0, 2.0],
                      output_tokens=3)
    row = r.to_row()
    row.update(kw)
    return row


@pytest.mark.unit
def test_new_run_dir_unique(tmp_path: Path) -> None:
    a = results.new_run_dir(tmp_path, "my run!")
    b = results.new_run_dir(tmp_path, "my run!")
    assert a != b and a.name.endswith("my-run") and (a / "records").is_dir()


@pytest.mark.unit
def test_sink_consolidate_dedupes_and_tolerates_a_torn_line(tmp_path: Path) -> None:
    run = results.new_run_dir(tmp_path, "t")
    sink = results.RecordSink(run, "p1")
    for i in range(5):
        sink.add(_row(i))
    sink.add(_row(2))  # the same request twice (a resent batch) counts once
    sink.close()
    with open(sink.path, "a") as fh:
        fh.write('{"request_id": "torn", "work')  # a kill mid-write
    out = results.consolidate(run)
    table = pq.read_table(out)
    assert table.num_rows == 5
    assert table.column_names == list(RECORD_FIELDS)
    assert table.column("itl_ms").to_pylist()[0] == [1.0, 2.0]


@pytest.mark.integration  # kills a real writer process
def test_kill_minus_nine_keeps_flushed_records(tmp_path: Path) -> None:
    """A writer killed with SIGKILL: everything older than the flush interval is on disk."""
    code = f"""
import time, sys
sys.path.insert(0, {str(Path(__file__).parents[2] / 'src')!r})
from pathlib import Path
from zerohop.storage.run_folder import RecordSink
sink = RecordSink(Path({str(tmp_path)!r}), 'victim')
i = 0
while True:
    sink.add({{"request_id": f"r{{i}}", "attempt": 1, "sent_ts": float(i)}})
    i += 1
    if i == 200:
        print("ready", flush=True)
    time.sleep(0.005)
"""
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(1.5)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    rows, bad = results.read_record_rows(tmp_path)
    assert len(rows) >= 200  # at least what existed 1 s before the kill
    assert bad <= 1
    ids = [int(r["request_id"][1:]) for r in rows]
    assert sorted(ids) == list(range(len(ids)))  # a prefix: nothing in the middle lost


@pytest.mark.unit
def test_secrets_never_reach_the_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-test-SECRET-0123456789"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-ABCDEFGHIJ")
    run = results.new_run_dir(tmp_path, "sec")
    results.start_manifest(run, name="sec", config={"api_key": secret, "host": "h",
                                                    "headers": {"Authorization": "Bearer x"},
                                                    "note": f"key is {secret}"})
    sink = results.RecordSink(run, "p")
    sink.add(_row(1, error_message=f"401: invalid key {secret} / tok-ABCDEFGHIJ"))
    sink.close()
    results.consolidate(run)
    results.finish_manifest(run, status="completed", end_reason="finished")
    for path in run.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert secret.encode() not in data, path
            assert b"tok-ABCDEFGHIJ" not in data, path
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["config"]["api_key"] == "***"
    assert manifest["config"]["headers"]["Authorization"] == "***"
    assert manifest["status"] == "completed" and manifest["duration_s"] >= 0
