"""CuPy microbenchmarks of the GPU floor: kernel launch, ring-buffer enqueue, PCIe.

Importing this package imports no CuPy and touches no GPU; `runner.run_benchmarks` does,
lazily. Results follow `schema.MicrobenchResult` (microbench.json, schema v1).
"""
