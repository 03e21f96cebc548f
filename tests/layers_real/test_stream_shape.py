"""A hop that changes the stream is named: nginx with gzip on the event stream holds
events and sends them in bursts; nginx with proxy_buffering off passes each on as it
comes. Both arms of one run, each judged against the same run's direct requests."""

from __future__ import annotations

import json
from pathlib import Path

from tests.main_job.test_run_command import zerohop
from tests.real_layers import start_nginx

ANSWERS = ("kind: short_query_flood\nname: answers\ninput_tokens: 32\nmax_tokens: 32\n"
           "load: {kind: closed, users: 2}\n")


def test_buffering_nginx_changes_the_stream_and_streaming_nginx_does_not(
        tmp_path: Path, nginx_bin: str, replicas: list[str]) -> None:
    wl = tmp_path / "answers.yaml"
    wl.write_text(ANSWERS)
    with start_nginx(replicas[:1], tmp_path, mode="stream") as streaming, \
            start_nginx(replicas[:1], tmp_path, mode="buffer") as buffering:
        res = zerohop("run", "--host", replicas[0], "--compare-layer",
                      "--layer-url", f"nginx-stream={streaming.url}",
                      "--layer-url", f"nginx-gzip={buffering.url}",
                      "--workload", str(wl), "--only", "ShortQueryFlood", "--duration", "12s",
                      "--results-dir", str(tmp_path), "--name", "shape", timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    shapes = json.loads(next(tmp_path.glob("compare-*.json")).read_text())["stream"]
    assert not shapes["nginx-stream"]["changed"], shapes["nginx-stream"]
    gzip = shapes["nginx-gzip"]
    assert gzip["changed"], gzip
    assert gzip["tokens_per_read"] >= 2 * gzip["direct_tokens_per_read"], gzip
    print(res.stdout)
    assert "nginx-gzip     CHANGED" in res.stdout
    assert "nginx-stream   unchanged" in res.stdout
