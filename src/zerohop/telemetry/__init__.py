"""Telemetry: the GPU (NVML), the server (Prometheus /metrics) and the load generator
itself, sampled on the same wall clock as the request records, into
`results/<run>/telemetry.parquet`.

Entry points: `spec.parse_telemetry_spec` (the `--telemetry` flag),
`recorder.TelemetryRecorder` (start at test start, stop at quit),
`store.consolidate_telemetry` (after a crash), `canonical.GLOSSARY` (what each metric
means), `exporter.exporter_command` (`zerohop exporter`).
"""
