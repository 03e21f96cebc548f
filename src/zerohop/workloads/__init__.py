"""Workloads: what to send and when, as pure, seeded values.

Nothing here knows Locust or HTTP, and importing it does nothing. Its rooms, in the
order data flows through them (each imports only those before it, and `errors`):

* `schema/`: the strict YAML model, one module per concern: `model_base`
  (`StrictModel`), `distributions` (token counts), `load_spec` (closed, open and trace
  loads, arrivals, rate curves), `policy_spec` (timeouts, retries, continuation,
  fallback), `session_specs` (conversation sources, the shared-prefix pool),
  `workload_base` (the fields every kind shares), `agent_spec`, `pooling_specs`,
  `image_spec`, `lora_selection`, `data_paths` (`${VAR}` in paths) and `kinds`
  (`ShortQueryFloodSpec`, `LongContextSpec`, `LoraMixSpec`, `TraceReplaySpec`,
  `ConversationSpec`, `SharedPrefixSpec`).
* `content/`: what is sent: `prompts` (`PromptBuilder`, `TokenCalibration`, exact
  sizes from `word_counts`), `local_tokenizer` (`--tokenizer`), `synthetic_images`.
* `timing/`: when: `rate_curve` (ramp, step, spike, piecewise) and `arrivals` (poisson,
  gamma with CV, constant) by time rescaling; `traces` (`read_trace` for Azure CSV,
  Mooncake JSONL and ShareGPT JSON; `replay_window`) and `conversation_sources` (the
  turn lengths of recorded conversations).
* `planners/`: what each worker sends next: `request_plans` (`make_planner(...)` with
  `next_request()` for a closed loop and `schedule()` for an open one, giving
  `PlannedRequest`s), `shared_prefix`, `conversation` (`Session`s of turns), `agent`
  (`AgentLoop`s of tool-calling steps), `pooling`, `session_planner` and `worker_load`
  (a worker's share of the load, `worker_setup`).

Here: `kind_registry` (one `WorkloadKind` entry per kind: its spec, user class, default
file, planner), `kind_planner` (`make_workload_planner(spec, setup)`: the planner of any
kind), `yaml_io` (`load_workload_file(path)`), `inputs` (`load_workloads(files)`,
`check_inputs(spec)`), `benchmark_spec` (the one-line benchmark's flags as a workload),
`reference` (the field reference) and `errors` (`WorkloadError`, one line naming the file
and field path).
"""
