"""One run of the workloads: plan it, start Locust (and the embedded target), finish the
results folder. The `run` command and the planners (sweep, capacity, nightly) share it."""
