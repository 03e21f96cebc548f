"""The saturation verdict as the report's verdict says it: one sentence, from the
figures `analysis/server/saturation_replay.saturation_figures` gives summary.json too."""

from __future__ import annotations

from typing import Any

SIGNAL_WORDS = {
    "first_token_wait": "the first-token wait",
    "in_flight_age": "the age of the requests in flight",
    "server_queue": "the target's own queue",
    "dropped_arrivals": "arrivals dropped at the in-flight cap",
}


def saturation_sentence(figures: dict[str, Any] | None) -> str | None:
    """"Saturated since 21 s (…)" or "Not saturated: …"; None: no records."""
    if figures is None:
        return None
    if not figures.get("saturated"):
        return ("Not saturated: the target kept up with the offered load (no first-token "
                "wait or backlog grew for a whole window).")
    rate = figures.get("offered_rps")
    at = f" at {rate:.3g} req/s offered" if rate is not None else ""
    signal = SIGNAL_WORDS.get(str(figures.get("signal")), str(figures.get("signal")))
    return (f"Saturated since {figures['since_s']:.0f} s of the load (found at "
            f"{figures['detected_s']:.0f} s by {signal}){at}: {figures['evidence']}.")


def stopped_sentence(figures: dict[str, Any] | None) -> str | None:
    """What `--stop-when-saturated` did, when it ended the load."""
    live = (figures or {}).get("live")
    if not isinstance(live, dict):
        return None
    return (f"--stop-when-saturated ended the load at {live.get('stopped_at_s', 0):.0f} s "
            f"of the planned {live.get('planned_s', 0):.0f} s: the figures cover the time "
            "the load ran.")


def saturation_section(figures: dict[str, Any] | None) -> dict[str, Any] | None:
    sentence = saturation_sentence(figures)
    if sentence is None:
        return None
    return {"saturated": bool(figures and figures.get("saturated")), "sentence": sentence,
            "stopped": stopped_sentence(figures)}
