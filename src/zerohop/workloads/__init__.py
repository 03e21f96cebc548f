"""Workloads: what to send and when, as pure, seeded values.

Nothing here knows Locust or HTTP, and importing it does nothing. The modules, in the
order data flows through them:

* the strict YAML model, one module per concern: `model_base` (`StrictModel`),
  `distributions` (token counts), `load_spec` (closed, open and trace loads, arrivals,
  rate shapes), `policy_spec` (timeouts, retries, continuation, fallback),
  `session_specs` (conversation sources, the shared-prefix pool), `workload_base`
  (the fields every kind shares), `agent_spec` (the agent kind and its tools), `kinds`
  (`ShortQueryFloodSpec`, `LongContextSpec`, `LoraMixSpec`, `TraceReplaySpec`,
  `ConversationSpec`, `SharedPrefixSpec`),
  `kind_registry` (one `WorkloadKind` entry per kind: its spec, user class, default
  file, planner; the union of the specs, discriminated on `kind`),
  `errors` (`WorkloadError`, one line naming the file and field path).
* `yaml_io`: `load_workload_file(path) -> WorkloadFile` (its `.workloads` is a list of
  specs); `inputs`: `load_workloads(files)` over several files and `check_inputs(spec)`
  (its trace is readable), what the CLI and the planners check before a run.
* `prompts`: `PromptBuilder(seed).build_text(n_units, rng)`, `TokenCalibration.fit(
  [(units, prompt_tokens), ...]).units_for_tokens(n)`, `default_calibration(api)`,
  `token_ids(n, rng, vocab_size)`; `word_counts`: `WordCounts`, each word's token count,
  which sizes a prompt exactly (`TokenCalibration.words`); `local_tokenizer`: a
  tokenizer.json (`--tokenizer`) and its word table.
* `shapes` / `arrivals`: rate curves (ramp, step, spike, piecewise) and arrival processes
  (poisson, gamma with CV, constant) by time rescaling; `worker_share` splits one shared
  schedule across workers (`WorkerLoadShare.in_flight_cap`: a worker's share of a cap).
* `traces`: `read_trace(path, format) -> list[TraceRequest]` for Azure CSV, Mooncake
  JSONL and ShareGPT JSON; `replay_window(..., speed=...)`.
* `conversation_sources`: the turn lengths of ShareGPT conversations and of the sessions
  rebuilt from the Mooncake conversation trace.
* `plans`: `make_planner(spec, seed=, worker_index=, worker_count=) -> Planner` with
  `next_request()` (closed loop) and `schedule()` (open loop and traces), each giving
  `PlannedRequest`s; `shared_prefix` (a `Planner` over a pool of system prompts),
  `conversation` (`ConversationPlanner`: `Session`s of turns, `run_session`) and
  `agent` (`AgentPlanner`: `AgentLoop`s of tool-calling steps, `run_agent_loop`) build
  on it, and `planners.make_workload_planner(spec, setup)` calls the planner of any kind
  (its registry entry's);
  `worker_load` holds what they all share (`worker_setup`, a worker's share of the load).
"""
