"""The chaos harness, a package of its own beside jobfence (the product holds no test
harness): ``jobfence chaos`` finds its command through the entry point group
``jobfence.commands``. A mixed workload through the real processes while faults are injected
on a seeded schedule, then a verdict on what the history says (docs/reliability.md, "Chaos
runs").

Modules, one job each: ``workload`` (the app the workers serve and its tables), ``mix`` (what
gets submitted), ``producer`` (submitting it: Client, SQL with notify, HTTP API), ``proxy`` (a
TCP proxy that can stall workers' PostgreSQL traffic), ``servers`` (the run's database,
its redis-server, PostgreSQL restarts), ``logs`` (what the processes wrote; jobfence's own
supervisor runs them), ``faults``
(the injectors and their schedule), ``queries`` and ``report`` (facts, verdict, table) and
``run`` (the whole run), ``command`` (the CLI command).
"""
