"""vllm-router's prefill/decode mode in front of a prefill and a decode embedded target:
`zerohop run` through it, and each request's TTFT split (prefill queue, prefill, KV
transfer, decode queue, first decode, remainder) read off the decode's Server-Timing
and checked against both targets' ground truth; the remainder is the router's cost.
"""

from __future__ import annotations

import json
import statistics
import urllib.parse
import urllib.request
from pathlib import Path

import pandas as pd
import pytest

from tests.main_job.test_run_command import zerohop
from tests.real_layers import start_vllm_router_pd
from zerohop.analysis.server.pd_split import PD_PARTS, REMAINDER, pd_frame
from zerohop.sim.cost_model.profiles import load_profiles
from zerohop.sim.pd_roles import kv_transfer_ms

EMBEDDED_MODEL = "llama-3.1-8b"  # the embedded target's (zerohop/data/embedded_target.yaml)
BANDWIDTH_GBPS, LATENCY_MS = 10.0, 2.0
FLOOD = ("kind: short_query_flood\nname: pd_flood\ninput_tokens: 600\nmax_tokens: 8\n"
         "ignore_eos: true\nload: {kind: closed, users: 3}\n")


def _truth(url: str, request_id: str) -> dict:
    query = urllib.parse.urlencode({"request_id": request_id})
    with urllib.request.urlopen(f"{url}/zerohop/ground_truth?{query}", timeout=5) as reply:
        return dict(json.loads(reply.read()))


def test_ttft_split_through_vllm_router_pd_mode(tmp_path: Path, vllm_router_bin: str) -> None:
    from zerohop.sim.embedded import start_embedded_target

    wl = tmp_path / "pd_flood.yaml"
    wl.write_text(FLOOD)
    with start_embedded_target(["--pd-role", "prefill"]) as prefill, \
            start_embedded_target(["--pd-role", "decode", "--kv-bandwidth-gbps",
                                   str(BANDWIDTH_GBPS), "--kv-latency-ms",
                                   str(LATENCY_MS)]) as decode, \
            start_vllm_router_pd(prefill.url, decode.url, tmp_path) as router:
        res = zerohop("run", "--host", router.url, "--workload", str(wl), "--duration", "8s",
                      "--results-dir", str(tmp_path), "--name", "pd", "--no-report",
                      timeout=180)
        assert res.returncode == 0, res.stderr[-3000:]
        records = pd.read_parquet(next(tmp_path.glob("*/requests.parquet")))
        assert len(records) >= 10 and (records["outcome"] == "ok").all(), \
            records["outcome"].value_counts()
        frame = pd_frame(records)
        assert len(frame) == len(records)  # the split is there for every request
        truths = [(_truth(prefill.url, rid), _truth(decode.url, rid))
                  for rid in frame["prefill_request_id"]]
    per_token = load_profiles().model(EMBEDDED_MODEL).kv_bytes_per_token
    for (_, row), (p_truth, d_truth) in zip(frame.iterrows(), truths, strict=True):
        assert p_truth["pd_role"] == "prefill" and d_truth["pd_role"] == "decode"
        assert row["prefill_queue"] == _near(p_truth["queue_ms"])
        assert row["prefill"] == _near(p_truth["prefill_ms"])
        for name in ("kv_transfer", "decode_queue", "first_decode"):
            assert row[name] == _near(d_truth[f"{name}_ms"]), name
        assert row["kv_transfer"] == _near(kv_transfer_ms(
            d_truth["prompt_tokens"], per_token, BANDWIDTH_GBPS, LATENCY_MS))
        assert row[REMAINDER] >= -0.5, row.to_dict()
    medians = {name: round(statistics.median(frame[name]), 3)
               for name in ("ttft_ms", *PD_PARTS, REMAINDER)}
    print("PD medians (ms):", json.dumps(medians))


def _near(value: float) -> object:
    return pytest.approx(value, abs=1e-3)
