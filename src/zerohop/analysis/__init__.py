"""Pure computation over one run's tables (`run_data.RunData`): no files, Locust, gevent
or click.

Here, what every analysis reads: `run_data` (the tables and their column types),
`itl_column` (every request's per-token gaps, float32 with the exact float64 a pass
away), `measured_window` (the one interval every rate divides by), `timeseries`
(windows on the run's time axis), `quantiles`, `rank_select` and `itl_pools` (exact
percentiles without copying the gaps), `bootstrap`, `counters` (a counter's rate, a
histogram's quantile: one restart rule) and `server_timing`; and what assembles them:
`run_analysis` (every figure the report shows) and `summary_document` (summary.json).

Its rooms, each importing only the modules here and the rooms listed after it:
- `comparison/`: runs and arms side by side (`compare`, `comparability`, `arms`,
  `layer_knee`), the interference probe and the answers under load;
- `latency/`: what each request took and what the run achieved: per-workload
  summaries, SLOs, the results block, reads and token counts, sessions, LoRA adapters,
  client policies, speculative decoding, errors;
- `server/`: what the server and its GPUs did: the time budget and engine phases, the
  prefill/decode split, telemetry drivers and correlation, energy (and which series are
  modelled), alerts, saturation and its replay, the GPU microbenchmarks;
- `client/`: whether the load generator kept up (`fidelity`) and how far its timings
  are from what the target sent (`fidelity_check`, `client_certificate`).
"""
