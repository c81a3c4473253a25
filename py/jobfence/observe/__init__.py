"""Observability beyond SQL: the Prometheus exporter of the ``jobs.queue_depth`` and
``jobs.metrics`` numbers (``exporter``) and the per-process metrics of workers, reapers and
relays (``process``). docs/observability.md lists every metric name and label."""
