"""The embedded target's HTTP side: `http_server` (HTTP/1.1 on asyncio, byte-level
control for faults), `app` (routes, request parsing, admission), `response_base` with
`streams` and `buffered_response` (each request's answer on the wire), `pooling`
(embeddings, rerank, score) and `exposition` (`/metrics` in Prometheus text)."""
