"""The nightly's run-to-run noise band: what an unchanged rerun may differ by.

A per-request bootstrap cannot see a disturbance that lasts a whole run (another
process sharing the CPU), so each gated percentile is also judged on the samples'
own figures. The band is the spread (max − min) of that percentile over either side's
samples. A change is "within noise" when the pooled delta is inside the band, or when
every candidate sample lies inside the baseline samples' range widened by the band:
that is where the samples of an unchanged rerun fall, so such a rerun is never called
better or worse, however its pooled figures happen to land.
"""

from __future__ import annotations

from collections.abc import Sequence

from zerohop.analysis.latency.run_summary import RunSummary


def sample_figures_of(samples: Sequence[RunSummary], metric: str, stat: str) -> list[float]:
    """One percentile (`stat`: "p50", "p90", ...) of `metric` in each sample's summary
    (samples without a value left out)."""
    dists = [s.total.latency[metric] for s in samples]
    return [d.get(stat) for d in dists if d.n]


def spread(figures: Sequence[float]) -> float:
    """max − min of the samples' figures (0 with fewer than two)."""
    return float(max(figures) - min(figures)) if len(figures) > 1 else 0.0


def within_noise(delta: float, base: Sequence[float], cand: Sequence[float],
                 band: float) -> bool:
    """True when the pooled `delta` or the candidate's sample figures stay in the band."""
    if abs(delta) <= band:
        return True
    if not base or not cand:
        return False
    return min(base) - band <= min(cand) and max(cand) <= max(base) + band
