"""The simulated engine: `engine` (one served model advancing in real time), `scheduler`
(vLLM V1-style, over `kv_cache` with `prefix_cache`), `lora` slots, its counters
(`engine_counters`, `histograms`, `engine_stats`), and `step_timer` with
`token_delivery` (each step's end, to the streams)."""
