"""Locust integration: options, the LLM users, the open-loop dispatcher and the hooks
that own a run's results folder, telemetry and embedded target."""
