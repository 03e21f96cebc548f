"""The embedded target: a simulated inference engine speaking the vLLM (OpenAI) and
Anthropic APIs, timed by a model of continuous batching on a chosen GPU.

Entry points: `zerohop sim` (cli.sim_command), `python -m zerohop.sim`, and
`zerohop.sim.launcher.start_sim()` for tests. Importing this package does nothing.
"""
