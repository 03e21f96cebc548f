"""Whether two runs may be compared figure by figure: a verdict between a 30 s and a
15 s run, or between two loads, or on figures a strained client distorted, says as much
about the setup as about the target. These are the warnings a comparison leads with."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from zerohop.analysis.client.fidelity import assess_fidelity
from zerohop.analysis.run_data import RunData
from zerohop.analysis.timeseries import telemetry_lanes

DURATION_TOLERANCE = 0.10  # relative difference of the measured durations worth a word
LOAD_KEYS: tuple[str, ...] = ("mode", "users", "rate_rps", "arrival")


def comparability_warnings(base: RunData, candidate: RunData) -> list[str]:
    """One line per way the runs differ in duration, load or client fidelity."""
    warnings = []
    b_s, c_s = _duration(base.manifest), _duration(candidate.manifest)
    if b_s and c_s and abs(c_s - b_s) > DURATION_TOLERANCE * max(b_s, c_s):
        warnings.append(
            f"the runs lasted differently ({b_s:.4g} s baseline, {c_s:.4g} s candidate): "
            "warm-up and tail weigh differently in each"
        )
    b_load, c_load = _load(base.manifest), _load(candidate.manifest)
    changed = [k for k in LOAD_KEYS if b_load.get(k) != c_load.get(k)]
    if changed:
        parts = ", ".join(f"{k} {b_load.get(k)} → {c_load.get(k)}" for k in changed)
        warnings.append(f"the runs were driven by different loads ({parts})")
    flagged = [
        f"{role} ({'; '.join(fidelity.reasons)})"
        for role, run in (("baseline", base), ("candidate", candidate))
        if not (fidelity := _fidelity(run)).ok
    ]
    if flagged:
        warnings.append(
            "client fidelity flagged in the " + " and the ".join(flagged)
            + ": the load generator may have distorted what it measured"
        )
    return warnings


def _duration(manifest: Mapping[str, Any]) -> float | None:
    value = manifest.get("duration_s")
    if isinstance(value, int | float) and math.isfinite(value) and value > 0:
        return float(value)
    return None


def _load(manifest: Mapping[str, Any]) -> dict[str, Any]:
    load = manifest.get("load")
    return {k: load.get(k) for k in LOAD_KEYS} if isinstance(load, dict) else {}


def _fidelity(run: RunData) -> Any:
    return assess_fidelity(
        run.requests, telemetry_lanes(run.telemetry), run.manifest.get("client_fidelity")
    )
