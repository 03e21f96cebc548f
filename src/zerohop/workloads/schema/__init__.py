"""The workload file's strict model, one module per concern; `kinds` holds each kind's
spec on top of `workload_base` (see the package's map). Imports only `content/`."""
