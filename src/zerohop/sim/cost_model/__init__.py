"""What an engine step costs: `profiles` (GPUs and models, the roofline), `step_cost`,
`tensor_parallel`, `spec_decode` (a modelled draft model) and `gpu_activity` (the
modelled GPU gauges). Imports nothing else of the embedded target."""
