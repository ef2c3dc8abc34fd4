"""Making a run: the output folder with real git repositories and a fresh store, the agent
processes, their workload and drivers, live progress. What it leaves is files: the
per-process histories, the store (read back for its events), ``samples.jsonl``.

- ``layout``: the output folder: make it, read back the history, events and samples;
- ``runner``: spawn the agents, tell them go/stop/drain, sample, run the tick hooks;
  it satisfies ``faults.control.RunControl``, which is all the nemesis sees of it;
- ``agent``: one agent process, ``python -m sim.run.agent <config.json>`` (``agentproc``: starting
  its driver, its CPU);
- ``editguard``: a ``guarded_edit``, an edit through the edit guard each harness's install
  wrote, asked with that harness's own hook event;
- ``workload``: what an agent does next (pure, seeded); ``drivers``: how it reaches the
  store (``direct``, ``$SIM_STORE_FACTORY``, or ``mcp`` through ``agents-room serve``);
  ``harnessdriver``: ``harness``, a real CLI whose scripted model the workload plays (``harnesshome``:
  its HOME's settings, its process tree);
- ``progress``: the live display.

Imports from sim: ``scenario``, ``check`` (the history file format), ``hosts`` (the
simulated host an agent runs on), ``faults`` (the agent's side of fault injection: the
saboteur, the shared clock) and ``harness`` (the scripted model and the CLIs).
"""
