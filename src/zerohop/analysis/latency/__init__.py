"""What each request took and what the run achieved: `summary` and `run_summary`
(per-workload figures over the measured window), `slo`, `results_table` (the results
block), `reads` and `token_counts`, `load_shape`, `prefill`, `sessions`, `lora_adapters`,
`policy`, `spec_decode`, `structured_output`, `stream_shape`, `error_samples`."""
