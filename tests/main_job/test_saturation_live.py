"""The live saturation path: the load generator's feed counts what each attempt does,
the console's watch sums the processes' lines into one observation, and
`--stop-when-saturated` stops the load the first time the verdict says saturated, the
run then finished as a completed one."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from zerohop.core.layout import LIVE_DIR, SATURATION_STOP_KEY
from zerohop.loadgen.saturation_feed import LiveFeed
from zerohop.runner import progress
from zerohop.runner.saturation_watch import SaturationWatch, note_saturation_stop
from zerohop.storage import run_folder

pytestmark = pytest.mark.unit


def test_the_feed_counts_each_attempt_once_from_its_schedule() -> None:
    feed = LiveFeed()
    now = time.perf_counter_ns()
    old = feed.started(now - 5_000_000_000)  # scheduled 5 s ago, still waiting
    quick = feed.started(now - 1_000_000_000)
    feed.first_content(quick, True)
    feed.first_content(quick, True)  # told once only
    silent = feed.started(now)
    feed.ended(silent, ok=False)  # ended before any content: answered by its end
    feed.ended(quick, ok=True)
    line = feed.line(dropped=2)
    assert (line["offered"], line["completed"], line["answered"], line["dropped"]) == (
        5, 2, 2, 2)
    assert line["oldest_wait_s"] == pytest.approx(5.0, abs=0.5)
    assert line["oldest_in_flight_s"] == pytest.approx(5.0, abs=0.5)
    assert line["first_token_s"] == pytest.approx(1.0, abs=0.5)
    assert line["e2e_s"] == pytest.approx(1.0, abs=0.5)
    again = feed.line(dropped=2)  # the second's medians start again
    assert again["first_token_s"] is None and again["e2e_s"] is None
    feed.first_content(old, False)  # an error before content: answered, no first token
    assert feed.line(dropped=0)["oldest_wait_s"] is None


def test_arrivals_waiting_for_a_cap_slot_are_offered_and_waiting_since_due() -> None:
    feed = LiveFeed()
    now = time.perf_counter_ns()
    sent = feed.started(now - 1_000_000_000)
    feed.first_content(sent, True)
    line = feed.line(dropped=0, held=7, held_since_ns=now - 9_000_000_000)
    assert (line["offered"], line["answered"]) == (8, 1)  # the 7 held: offered, unanswered
    assert line["oldest_wait_s"] == pytest.approx(9.0, abs=0.5)  # from their due time
    assert feed.line(dropped=0)["oldest_wait_s"] is None  # none held, none waiting


def feed_line(ts: float, served_share: float, second: int, rate: int = 20) -> dict[str, Any]:
    """One process's line after `second` seconds of `rate` arrivals a second, of which
    `served_share` were answered (FIFO: the oldest waiting arrived backlog/rate ago)."""
    offered = rate * second
    answered = int(offered * served_share)
    backlog = offered - answered
    return {"ts": ts + second, "offered": offered, "dropped": 0, "completed": answered,
            "answered": answered, "oldest_wait_s": backlog / rate + 0.05 if backlog else None,
            "oldest_in_flight_s": backlog / rate + 0.05 if backlog else None,
            "first_token_s": 0.05, "e2e_s": 0.1}


def test_the_watch_sums_the_processes_and_says_saturated(tmp_path: Path) -> None:
    live = tmp_path / LIVE_DIR
    live.mkdir()
    watch = SaturationWatch(tmp_path)
    assert watch.status() == ""
    for second in range(1, 40):
        for name, share in (("a", 0.5), ("b", 0.99)):  # one keeps up, one does not
            with open(live / f"{name}.jsonl", "a") as out:
                out.write(json.dumps(feed_line(1000.0, share, second)) + "\n")
        verdict = watch.poll()
        if second == 10:  # a's wait passed its floor at 3 s: not yet a window of it
            assert not verdict.saturated and watch.status() == "  keeping up"
    obs = watch.detector.history[-1]
    assert obs.offered == 2 * 20 * 39 and obs.answered == 390 + int(780 * 0.99)
    # process a's backlog of 390 is 19.5 s old (b's of 8, 0.4 s): the oldest of any
    assert obs.oldest_wait_s == pytest.approx(19.55)
    assert verdict.saturated and watch.status().startswith("  SATURATED since")


class FakeLocust:
    """A process that writes one feed line per poll, overloaded, until signalled."""

    def __init__(self, live: Path) -> None:
        self.live, self.second, self.signals = live, 0, []  # type: list[int]
        live.mkdir(parents=True)

    def poll(self) -> int | None:
        if self.signals or self.second >= 120:
            return 0
        self.second += 1
        with open(self.live / "local-1.jsonl", "a") as out:
            out.write(json.dumps(feed_line(1000.0, 0.6, self.second)) + "\n")
        return None

    def send_signal(self, signum: int) -> None:
        self.signals.append(signum)


def test_stop_when_saturated_stops_the_load_once(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "REFRESH_S", 0.0)
    locust = FakeLocust(tmp_path / LIVE_DIR)
    stopped = progress.follow_progress(locust, tmp_path, 120.0,  # type: ignore[arg-type]
                                       stop_when_saturated=True)
    assert locust.signals == [signal.SIGTERM]
    assert stopped is not None and stopped["saturated"] and stopped["planned_s"] == 120.0
    # 40 % of 20/s unanswered: the wait is 0.05 + 0.4 s a second, past 1 s from the third
    # line on (2 s after the first: since 2 s); the 15 s window is whole 14 s later
    assert stopped["since_s"] == pytest.approx(2.0) and stopped["stopped_at_s"] < 20
    again = FakeLocust(tmp_path / "b" / LIVE_DIR)
    assert progress.follow_progress(again, tmp_path / "b", 120.0) is None  # not asked
    assert again.signals == [] and again.second == 120


def test_a_stopped_run_is_completed_and_keeps_the_verdict(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    run_dir = run_folder.new_run_dir(tmp_path, "t")
    run_folder.start_manifest(run_dir, name="t", target={}, workloads=[], load={})
    run_folder.update_manifest(run_dir, status="interrupted", end_reason="SIGTERM")
    stopped = {"saturated": True, "since_s": 3.0, "signal": "first_token_wait",
               "offered_rps": 62.7, "stopped_at_s": 17.0, "planned_s": 60.0}
    note_saturation_stop(run_dir, stopped)
    manifest = run_folder.read_manifest(run_dir)
    assert manifest["status"] == "completed"
    assert manifest["end_reason"] == "stopped early: saturated"
    assert manifest[SATURATION_STOP_KEY] == stopped
    assert ("stopped early at 17 s of the planned 60 s (--stop-when-saturated): saturated "
            "since 3 s by the first-token wait at 62.7 req/s offered") in capsys.readouterr().out


def test_the_client_tells_the_feed_at_the_first_content_read_only() -> None:
    """The reads of a recorded stream fed to the client's first-content detector
    (`llm_client._watched`): the feed hears once, at the read that carries content (a
    role-only first chunk is not content), and the detector stops being fed there."""
    from tests.client.test_stream_contract import STREAMS_DIR, sse_blocks
    from zerohop.client.api_adapters import create_api_adapter
    from zerohop.client.llm_client import _watched
    from zerohop.client.measure import StreamDecode

    blocks = sse_blocks((STREAMS_DIR / "vllm_chat_usage.sse").read_bytes())
    heard: list[tuple[int, bool]] = []
    read_no = 0
    feed = _watched(StreamDecode(create_api_adapter("openai-chat")),
                    lambda content: heard.append((read_no, content)))
    assert feed is not None
    for read_no, block in enumerate(blocks):
        if feed(read_no, block):
            break
    assert heard == [(1, True)]  # read 0 is the role-only chunk
    assert _watched(None, lambda content: None) is None  # a body that is not a stream
