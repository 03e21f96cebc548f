"""What each worker sends next, kind by kind: `request_plans` (the single-request kinds
and `PlannedRequest`), `shared_prefix`, `conversation`, `agent`, `pooling`, with what they
share in `session_planner` and `worker_load`."""
