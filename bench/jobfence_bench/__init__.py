"""jobfence's benchmark suite, run by bench/run: one module per section (ceilings, sqlpath,
e2e, latency, scale, profile) plus report (table, JSON, charts) and common."""
