"""What the server and its GPUs did: `time_budget` (where each band's latency went, from
`engine_phases` and `phase_bounds`), `pd_split`, `driver_lanes` and `correlation`
(telemetry against latency), `energy` and `modelled` (which series a model made),
`alerts`, `saturation` with `saturation_replay`, and `microbench`."""
