"""Which telemetry series move with the latency percentiles, and how far ahead?

Per window, each latency series (e.g. p99 TTFT) is rank-correlated (Spearman ρ)
with each telemetry series shifted by every lag in ±`max_lag_windows`; the lag with
the largest |ρ| is kept. A positive lag means the telemetry leads: latency at
window t follows telemetry at window t − lag.

Significance. Window series are autocorrelated, so the textbook p-value (which
assumes independent windows) is far too small: two unrelated random walks look
"significant" almost every time. We use the t approximation for Spearman's ρ with an
effective sample size n_eff = n·(1 − r₁r₂)/(1 + r₁r₂), where r₁, r₂ are the lag-1
autocorrelations of the two ranked series (Bretherton et al., 1999, J. Climate
12:1990), multiply by the number of lags searched (Bonferroni, since the best of
them was picked), and control the false discovery rate over all pairs with
Benjamini–Hochberg. A driver must also have |ρ| ≥ `min_abs_rho`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from zerohop.core.metrics import window_labels

# How latency series are named in readings: column → plain words (`p99 TTFT`).
LATENCY_NAMES: dict[str, str] = window_labels()
# Telemetry not worth testing: constants, bitmasks and link descriptors, and the
# server's own TTFT (the latency itself, not a cause of it).
EXCLUDED_METRICS: frozenset[str] = frozenset(
    {"gpu_mem_total_bytes", "gpu_throttle_reasons", "pcie_link_gen", "pcie_link_width",
     "server_ttft_p50_s", "server_ttft_p99_s"}
)
MIN_WINDOWS = 12


@dataclass(frozen=True)
class CorrelationSettings:
    window_s: float
    max_lag_windows: int = 5
    fdr: float = 0.01
    min_abs_rho: float = 0.3
    min_windows: int = MIN_WINDOWS


@dataclass(frozen=True)
class PairResult:
    """The best lag found for one (latency, telemetry) pair."""

    latency: str
    series: str
    rho: float
    lag_windows: int
    lag_s: float
    n: int
    n_eff: float
    p_value: float  # after the lag-search (Bonferroni) correction
    q_value: float  # Benjamini–Hochberg over all pairs
    driver: bool


@dataclass(frozen=True)
class CorrelationReport:
    settings: CorrelationSettings
    pairs: list[PairResult]  # every pair tested, best first per latency series
    drivers: list[PairResult]  # the significant ones, ranked by |ρ|
    readings: list[str]  # one plain-language sentence per latency series
    skipped: list[str]  # series not tested and why


def find_drivers(
    latency: pd.DataFrame, telemetry: pd.DataFrame, settings: CorrelationSettings
) -> CorrelationReport:
    """Test every (latency column, telemetry column) pair; both frames share the
    window index."""
    skipped: list[str] = []
    names: list[str] = []
    columns: list[np.ndarray] = []
    for column in telemetry.columns:
        metric = str(column).split("{", 1)[0].split("@", 1)[0]
        if metric in EXCLUDED_METRICS:
            continue
        values = telemetry[column].to_numpy(dtype=float)
        finite = values[np.isfinite(values)]
        if finite.size < settings.min_windows or np.ptp(finite) == 0:
            skipped.append(f"{column}: constant or fewer than {settings.min_windows} windows")
            continue
        names.append(str(column))
        columns.append(values)
    matrix = np.column_stack(columns) if columns else np.empty((len(latency), 0))
    ranked: dict[tuple[int, bytes], tuple[np.ndarray, np.ndarray]] = {}  # one matrix's
    raw: list[tuple[str, str, float, int, int, float, float]] = []
    for lat_column in latency.columns:
        lat = latency[lat_column].to_numpy(dtype=float)
        if np.isfinite(lat).sum() < settings.min_windows:
            skipped.append(f"{lat_column}: fewer than {settings.min_windows} windows with data")
            continue
        scanned = lag_scan(lat, matrix, settings.max_lag_windows, settings.min_windows,
                           ranked)
        for name, best in zip(names, scanned, strict=True):
            if best is not None:
                raw.append((str(lat_column), name, *best))
    p_values = np.array([r[6] for r in raw])
    q_values = benjamini_hochberg(p_values) if raw else np.array([])
    pairs = [
        PairResult(
            latency=lat_column,
            series=name,
            rho=rho,
            lag_windows=lag,
            lag_s=lag * settings.window_s,
            n=n,
            n_eff=n_eff,
            p_value=p,
            q_value=float(q),
            driver=bool(q <= settings.fdr and abs(rho) >= settings.min_abs_rho),
        )
        for (lat_column, name, rho, lag, n, n_eff, p), q in zip(raw, q_values, strict=True)
    ]
    pairs.sort(key=lambda r: (list(latency.columns).index(r.latency), -abs(r.rho)))
    drivers = sorted((r for r in pairs if r.driver), key=lambda r: (-abs(r.rho), r.q_value))
    readings = [r for r in (_reading(str(column), pairs) for column in latency.columns) if r]
    if not drivers:
        readings.insert(0, _nothing_explains(len(names), len(latency), pairs, settings))
    return CorrelationReport(
        settings=settings,
        pairs=pairs,
        drivers=drivers,
        readings=readings,
        skipped=skipped,
    )


def _nothing_explains(series: int, windows: int, pairs: list[PairResult],
                      settings: CorrelationSettings) -> str:
    """The plain sentence for a run where no series is a driver, and why."""
    if not pairs:
        return (f"Nothing could be tested: {series} telemetry series over {windows} windows "
                f"of {settings.window_s:g} s (each test needs {settings.min_windows} windows "
                "where both series have data).")
    return (f"Nothing in the telemetry explains the latency: none of {series} series moved "
            f"with any latency percentile over {windows} windows of {settings.window_s:g} s "
            f"(|ρ| ≥ {settings.min_abs_rho:g} at a false-discovery rate of {settings.fdr:g}).")


def lag_scan(
    latency: np.ndarray, telemetry: np.ndarray, max_lag: int, min_windows: int,
    ranked: dict[tuple[int, bytes], tuple[np.ndarray, np.ndarray]] | None = None,
) -> list[tuple[float, int, int, float, float] | None]:
    """For each telemetry column: (ρ, lag, n, n_eff, corrected p) at the lag with the
    largest |ρ| (the smaller |lag| on a tie), or None when no lag leaves
    `min_windows` windows where both series have data.

    Columns without holes are ranked together — one rankdata call per lag for ρ and
    the autocorrelations alike — which keeps a hundred lanes × eleven lags × seven
    latency series fast; columns with holes take the one-at-a-time path. `ranked`
    keeps the ranked telemetry per (lag, windows with latency data) across calls on
    the same `telemetry`: the latency percentiles of a run mostly share their windows,
    so the lanes are ranked once per lag, not once per percentile.
    """
    lags = np.arange(-max_lag, max_lag + 1)
    m = telemetry.shape[1]
    rho = np.full((lags.size, m), np.nan)
    n_eff = np.full((lags.size, m), np.nan)
    count = np.zeros((lags.size, m), dtype=np.int64)
    for i, shift in enumerate(int(v) for v in lags):
        lat, tel = _aligned(latency, telemetry, shift)
        have = np.isfinite(lat)
        if have.sum() < min_windows:
            continue
        complete = np.isfinite(tel[have]).all(axis=0)
        if complete.any():
            key = (shift, np.packbits(have).tobytes())
            if ranked is None or key not in ranked:
                tel_ranks = _ranked_columns(tel[:, complete], have)
                if ranked is not None:
                    ranked[key] = tel_ranks
            else:
                tel_ranks = ranked[key]
            rho[i, complete], r_lat, r_tel = _spearman_block(lat, tel_ranks, have)
            n = int(have.sum())
            count[i, complete] = n
            n_eff[i, complete] = _bretherton(n, r_lat * r_tel)
        for j in np.flatnonzero(~complete):
            both = have & np.isfinite(tel[:, j])
            if both.sum() >= min_windows:
                rho[i, j] = spearman(lat[both], tel[both, j])
                count[i, j] = int(both.sum())
                n_eff[i, j] = effective_n(lat, tel[:, j], both)
    score = np.where(np.isnan(rho), -1.0, np.abs(rho))
    preference = np.argsort(np.abs(lags), kind="stable")  # lag 0, -1, 1, -2, 2, ...
    best_rows = preference[np.argmax(score[preference], axis=0)] if m else np.array([], int)
    results: list[tuple[float, int, int, float, float] | None] = []
    for col, row in enumerate(int(r) for r in best_rows):
        if score[row, col] < 0:
            results.append(None)
            continue
        r = float(rho[row, col])
        p = spearman_p_value(r, float(n_eff[row, col]))
        results.append(
            (
                r,
                int(lags[row]),
                int(count[row, col]),
                float(n_eff[row, col]),
                min(1.0, p * lags.size),
            )
        )
    return results


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's ρ: Pearson correlation of average ranks (ties averaged)."""
    rx, ry = stats.rankdata(x), stats.rankdata(y)
    sx, sy = rx.std(), ry.std()
    if sx == 0 or sy == 0:
        return math.nan
    return float(np.mean((rx - rx.mean()) * (ry - ry.mean())) / (sx * sy))


def _ranked_columns(tel: np.ndarray, have: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Average ranks of every column of `tel` over the windows `have` (no NaN there),
    and each ranked column's lag-1 autocorrelation over consecutive such windows
    (0 where fewer than 3 pairs)."""
    ranks_tel = stats.rankdata(tel[have], axis=0)
    pairs = have[:-1] & have[1:]  # consecutive windows that both have data
    if pairs.sum() < 3:
        return ranks_tel, np.zeros(tel.shape[1])
    full_tel = np.full(tel.shape, np.nan)
    full_tel[have] = ranks_tel
    return ranks_tel, np.nan_to_num(_column_correlation(full_tel[:-1][pairs],
                                                        full_tel[1:][pairs]))


def _spearman_block(
    lat: np.ndarray, tel_ranks: tuple[np.ndarray, np.ndarray], have: np.ndarray
) -> tuple[np.ndarray, float, np.ndarray]:
    """Spearman's ρ of `lat` against every ranked telemetry column (`_ranked_columns`
    over the windows `have`), plus the lag-1 autocorrelations of the ranked series
    that `effective_n` needs: (ρ per column, r_lat, r_tel per column)."""
    ranks_tel, r_tel = tel_ranks
    ranks_lat = stats.rankdata(lat[have])
    rho = _column_correlation(ranks_lat[:, None], ranks_tel)
    pairs = have[:-1] & have[1:]
    if pairs.sum() < 3:
        return rho, 0.0, np.zeros(ranks_tel.shape[1])
    full_lat = np.full(lat.size, np.nan)
    full_lat[have] = ranks_lat
    r_lat = _column_correlation(full_lat[:-1][pairs, None], full_lat[1:][pairs, None])[0]
    return rho, float(np.nan_to_num(r_lat)), r_tel


def _column_correlation(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pearson r of each column of `a` (or its single column) with each of `b`;
    NaN where a column is constant."""
    a_c = a - a.mean(axis=0)
    b_c = b - b.mean(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (a_c * b_c).sum(axis=0) / np.sqrt((a_c**2).sum(axis=0) * (b_c**2).sum(axis=0))


def _bretherton(n: int, product: np.ndarray | float) -> np.ndarray:
    product = np.maximum(np.asarray(product, dtype=float), 0.0)
    return np.minimum(float(n), np.maximum(3.0, n * (1.0 - product) / (1.0 + product)))


def effective_n(lat: np.ndarray, tel: np.ndarray, both: np.ndarray) -> float:
    """Bretherton's n_eff from the lag-1 autocorrelations of the two ranked series,
    measured on consecutive windows where both have data."""
    r1 = _lag1_autocorrelation(lat, both)
    r2 = _lag1_autocorrelation(tel, both)
    return float(_bretherton(int(both.sum()), r1 * r2))


def spearman_p_value(rho: float, n_eff: float) -> float:
    """Two-sided p from t = ρ·√((n_eff − 2)/(1 − ρ²)) with n_eff − 2 degrees of freedom."""
    dof = n_eff - 2.0
    if dof <= 0:
        return 1.0
    if abs(rho) >= 1.0:
        return 0.0
    t = rho * math.sqrt(dof / (1.0 - rho * rho))
    return float(2.0 * stats.t.sf(abs(t), dof))


def benjamini_hochberg(p_values: np.ndarray) -> np.ndarray:
    """BH-adjusted q-values (monotone, capped at 1), in the input order."""
    p = np.asarray(p_values, dtype=float)
    m = p.size
    if m == 0:
        return p
    order = np.argsort(p)
    ranked = p[order] * m / np.arange(1, m + 1)
    ranked = np.minimum.accumulate(ranked[::-1])[::-1]
    q = np.empty(m)
    q[order] = np.minimum(ranked, 1.0)
    return q


def _aligned(latency: np.ndarray, telemetry: np.ndarray, lag: int) -> tuple[np.ndarray, np.ndarray]:
    """Pairs (latency[t], telemetry[t − lag]) for every t where both indices exist."""
    n = latency.size
    if lag >= 0:
        return latency[lag:], telemetry[: n - lag]
    return latency[: n + lag], telemetry[-lag:]


def _lag1_autocorrelation(values: np.ndarray, both: np.ndarray) -> float:
    ranks = np.full(values.size, np.nan)
    ranks[both] = stats.rankdata(values[both])
    a, b = ranks[:-1], ranks[1:]
    pair = np.isfinite(a) & np.isfinite(b)
    if pair.sum() < 3:
        return 0.0
    a, b = a[pair], b[pair]
    if a.std() == 0 or b.std() == 0:
        return 0.0
    return float(np.corrcoef(a, b)[0, 1])


def _reading(latency_column: str, pairs: list[PairResult]) -> str:
    """'p99 TTFT follows queue_depth (ρ=0.91, lag 3 s, telemetry leads); not
    pcie_rx_bytes_per_s (ρ=0.05)'."""
    mine = [r for r in pairs if r.latency == latency_column]
    if not mine:
        return ""
    name = LATENCY_NAMES.get(latency_column, latency_column)
    drivers = [r for r in mine if r.driver]
    others = sorted((r for r in mine if not r.driver), key=lambda r: -abs(r.rho))[:2]
    not_part = "; not " + ", ".join(f"{r.series} (ρ={r.rho:.2f})" for r in others)
    if not drivers:
        return f"{name}: no telemetry series is a likely driver{not_part if others else ''}"
    top = drivers[0]
    verb = "follows" if top.rho > 0 else "moves against"
    text = f"{name} {verb} {top.series} (ρ={top.rho:.2f}, {_lag_words(top)})"
    if len(drivers) > 1:
        also = ", ".join(f"{r.series} (ρ={r.rho:.2f})" for r in drivers[1:3])
        text += f"; also {also}"
    return text + (not_part if others else "")


def _lag_words(result: PairResult) -> str:
    if result.lag_windows == 0:
        return "lag 0 s"
    who = "telemetry leads" if result.lag_windows > 0 else "latency leads"
    return f"lag {abs(result.lag_s):g} s, {who}"
