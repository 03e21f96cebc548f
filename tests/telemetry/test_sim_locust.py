"""The embedded target's /metrics scraped during a real Locust run: a burst of users
makes its queue rise and fall, and the telemetry shows it in the same seconds."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

pytestmark = pytest.mark.integration

LOCUSTFILE = textwrap.dedent('''
    import json, os, time
    from pathlib import Path
    from locust import HttpUser, LoadTestShape, constant, events, task
    from locust.runners import WorkerRunner
    from zerohop.core.records import ClockAnchor
    from zerohop.telemetry.recorder import TelemetryRecorder
    from zerohop.telemetry.spec import parse_telemetry_spec, with_target_url

    RUN_DIR = Path(os.environ["ZH_RUN_DIR"])
    SIM = os.environ["ZH_SIM_URL"]
    MODEL = os.environ["ZH_MODEL"]
    state = {"phases": []}

    @events.test_start.add_listener
    def start_telemetry(environment, **_):
        if isinstance(environment.runner, WorkerRunner):
            return
        sources = with_target_url(
            parse_telemetry_spec("prom:interval=0.2,loadgen:interval=0.5"), SIM + "/metrics")
        state["recorder"] = TelemetryRecorder(sources, RUN_DIR, anchor=ClockAnchor.now())
        state["recorder"].start()

    @events.quitting.add_listener
    def stop_telemetry(environment, **_):
        recorder = state.pop("recorder", None)
        if recorder is not None:
            recorder.stop()
        (RUN_DIR / "phases.json").write_text(json.dumps(state["phases"]))

    class Spike(LoadTestShape):
        """1 user for 3 s, a burst of 30 for 1.5 s, then 1 user again."""
        def tick(self):
            t = self.get_run_time()
            users = 1 if t < 3.0 else 30 if t < 4.5 else 1 if t < 8.5 else None
            if users is None:
                return None
            if not state["phases"] or state["phases"][-1][1] != users:
                state["phases"].append([time.time(), users])
            return (users, 100)

    class Completion(HttpUser):
        host = SIM
        wait_time = constant(0.3)

        @task
        def complete(self):
            self.client.post("/v1/completions", json={
                "model": MODEL, "prompt": "tell me a story " * 20, "max_tokens": 24})
''')


@pytest.mark.alone  # timing-sensitive: CI runs it with no test beside it
def test_queue_depth_follows_an_injected_spike(tmp_path: Path) -> None:
    from zerohop.sim.launcher import start_sim

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    locustfile = tmp_path / "spike_locustfile.py"
    locustfile.write_text(LOCUSTFILE)
    with start_sim(["--max-num-seqs", "2"]) as sim:
        conn = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=10)
        conn.request("GET", "/v1/models")
        model = json.loads(conn.getresponse().read())["data"][0]["id"]
        env = dict(os.environ, ZH_RUN_DIR=str(run_dir), ZH_SIM_URL=sim.url, ZH_MODEL=model)
        done = subprocess.run(
            [sys.executable, "-m", "locust", "-f", str(locustfile), "--headless",
             "--only-summary", "--loglevel", "WARNING", "--stop-timeout", "1"],
            env=env, capture_output=True, text=True, timeout=90, cwd=tmp_path,
        )
        metrics_port = sim.port
    assert (run_dir / "telemetry.parquet").exists(), done.stderr[-3000:]

    phases = json.loads((run_dir / "phases.json").read_text())
    assert [users for _, users in phases] == [1, 30, 1]
    spike_start, spike_end = phases[1][0], phases[2][0]

    df = pd.read_parquet(run_dir / "telemetry.parquet")
    queue = df[(df.source == f"prom:127.0.0.1:{metrics_port}") & (df.metric == "queue_depth")]
    assert len(queue) >= 25  # 0.2 s scrapes over ~8 s
    before = queue[queue.ts < spike_start - 0.2]
    during = queue[(queue.ts >= spike_start) & (queue.ts <= spike_end + 0.5)]
    after = queue[queue.ts > spike_end + 2.5]
    assert len(before) >= 3 and before.value.max() <= 1
    assert during.value.max() >= 10, during.to_string()
    # the peak is inside the burst's seconds, not smeared or shifted
    peak_ts = during.loc[during.value.idxmax(), "ts"]
    assert spike_start <= peak_ts <= spike_end + 0.5
    assert len(after) >= 3 and after.value.max() <= 2, after.to_string()
    # the same run also shows the load generator watching itself
    assert (df.metric == "loadgen_loop_lag_ms").any()
    assert not (df.metric == "gap").any()
