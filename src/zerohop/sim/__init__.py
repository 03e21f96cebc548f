"""The embedded target: a simulated inference engine speaking the vLLM (OpenAI) and
Anthropic APIs, timed by a model of continuous batching on a chosen GPU.

Entry points: `zerohop sim` (cli.sim_command), `python -m zerohop.sim`, and
`zerohop.sim.launcher.start_sim()` for tests. Importing this package does nothing.

Its rooms, each importing only those listed after it (and the modules here):
- `serving/`: the HTTP side: the server, the application's routes and admission, the
  streamed and buffered responses, pooling endpoints and the `/metrics` exposition;
- `engine/`: the engine: scheduling over a paged KV cache with prefix caching, LoRA
  slots, its counters, and the step timer that delivers each step's tokens;
- `answers/`: what a request asks and what its answer says, as bytes: the body forms
  (one registry entry each), the API shapes, the tokenizer and token generator, greedy
  and structured answers;
- `cost_model/`: what a step costs on a GPU: model and GPU profiles, tensor
  parallelism, speculative decoding, the modelled GPU gauges.
Here: the configuration (`config`), faults, ground truth, prefill/decode roles, a
sequence's record, and how the target is started (`sim_command`, `launcher`, `embedded`).
"""
