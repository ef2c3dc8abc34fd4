"""The simulator: many agent processes on one agents-room store, every operation recorded,
the history checked, the figures reported (``sim run``); and the store's speed next to bare
SQLite and a bare MCP server (``sim bench``). docs/simulator.md is the manual.

``sim run``'s pipeline, a subpackage per stage::

    scenario/  TOML file -> Scenario (strict tables, the [faults] plan)
        |
    run/       output folder, store, agent processes  <--  faults/  nemesis on the run's tick,
        |      -> history/*.jsonl, the store's events,      through faults.control.RunControl
        |         samples.jsonl
    check/     history + events -> verdict (from those files alone)
        |
    report/    stats, plots -> report.md, report.json, *.png   (+ what each fault did)

``fit/`` (``sim fit``) reads a store's own traffic into a scenario (with ``[fitted]``: the figures
measured), and measures a run's store the same way for its report to compare.

``pipeline.py`` hands each stage's output to the next (``run_scenario``); ``cli.py`` is the
``sim`` command; ``bench/`` (``sim bench``, ``--sweep``, hook timing) stands beside.

``hosts/`` (simulated hosts in network and PID namespaces, one PostgreSQL between them) makes
the place a ``[hosts]`` run runs in; the runner places each agent on its host.

What each may import of sim, in this order, each only from those before it: ``scenario``
and ``check`` nothing; ``fit`` scenario; ``hosts`` scenario; ``faults`` scenario, check; ``run`` + hosts, faults; ``report`` + run, fit;
``pipeline`` + report; ``bench`` + pipeline; ``cli`` everything. Each subpackage's
``__init__`` says so on its ``Imports from sim:`` line; tests/test_import_graph.py holds
them to it and fails on any import cycle in sim/ or src/.
"""
