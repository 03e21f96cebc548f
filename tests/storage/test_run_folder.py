"""The results folder: sinks survive kill -9, consolidation, manifest, secrets."""

from __future__ import annotations

import datetime as dt
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


# RecordSink's promise: "a kill -9 loses at most the last half second"
CLAIMED_LOSS_S = 0.5

_WRITER = """
import os, time, sys
sys.path.insert(0, {src!r})
from pathlib import Path
from zerohop.storage.run_folder import RecordSink
sink = RecordSink(Path({folder!r}), 'victim')
log = os.open({adds!r}, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
i = 0
while True:
    began = time.monotonic()
    sink.add({{"request_id": f"r{{i}}", "attempt": 1, "sent_ts": float(i)}})
    returned = time.monotonic()
    os.write(log, f"{{i}} {{began!r}} {{returned!r}}\\n".encode())
    i += 1
    time.sleep(0.005)
"""


def _rows_older_than_the_claim_not_on_disk(adds: Path, folder: Path) -> tuple[int, list[int]]:
    """(rows due on disk, those of them missing), judged at the writer's latest `add`.

    A row is due when the writer began a later `add` at least CLAIMED_LOSS_S after that
    row's `add` returned: that `add` had the time to flush it. Read on the writer's own
    monotonic clock (logged through an unbuffered file, so the log outlives a kill), so a
    writer descheduled by a loaded machine is not blamed for time it never ran. The log is
    read before the records, and records are only appended, so nothing is excused."""
    if not adds.exists():  # the writer has not started yet
        return 0, []
    logged = [line.split() for line in adds.read_text().split("\n")[:-1]]  # whole lines
    if not logged:
        return 0, []
    last_began = max(float(began) for _, began, _ in logged)
    due = {int(i) for i, _, returned in logged if last_began - float(returned) >= CLAIMED_LOSS_S}
    rows, bad = results.read_record_rows(folder)
    assert bad <= 1  # at most the torn line a kill leaves
    on_disk = {int(r["request_id"][1:]) for r in rows}
    assert sorted(on_disk) == list(range(len(on_disk)))  # a prefix: nothing in the middle lost
    return len(due), sorted(due - on_disk)


@pytest.mark.integration  # kills a real writer process
def test_kill_minus_nine_keeps_flushed_records(tmp_path: Path) -> None:
    """A writer killed with SIGKILL: every row older than the flush interval is on disk,
    all of them. Checked while it writes (whatever moment a kill could come) for a few
    intervals, then once more after the kill itself."""
    adds = tmp_path / "adds.log"
    code = _WRITER.format(src=str(Path(__file__).parents[2] / "src"), folder=str(tmp_path),
                          adds=str(adds))
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        due, checks = 0, 0
        while due < 300 or checks < 100:
            assert proc.poll() is None, "the writer died"
            due, lost = _rows_older_than_the_claim_not_on_disk(adds, tmp_path)
            assert not lost, (f"{len(lost)} rows older than {CLAIMED_LOSS_S} s not on disk "
                              f"while writing, the oldest r{lost[0]}")
            checks += 1
            time.sleep(0.01)  # a sampling period, not a wait for an event
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    due, lost = _rows_older_than_the_claim_not_on_disk(adds, tmp_path)
    assert due >= 300 and not lost, (due, lost[:5])


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
    assert manifest["status"] == "completed"
    started, ended = (dt.datetime.fromisoformat(manifest[k].replace("Z", "+00:00"))
                      for k in ("started_at", "ended_at"))
    assert manifest["duration_s"] == pytest.approx((ended - started).total_seconds(), abs=1e-3)
