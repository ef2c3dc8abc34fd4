"""Fault injection: the nemesis, the agent-side pieces it arms, and what the faults did.

- ``control``: ``RunControl``, the narrow interface to the run the nemesis gets (the
  runner satisfies it; nothing here imports ``run``);
- ``nemesis``: carries out the scenario's ``[faults]`` plan on the run's tick; ``reaper``:
  kills an agent, starts its replacement, prunes the dead session;
- ``saboteur``: inside the agent, stops it at a moment only it can see (in a write, before
  an edit); ``clock``: the shared store clock that jumps, and times put back on the host's;
- ``report``: what each fault did, for the report; ``refusal``: damaged store copies
  tried on ``agents-room serve``, ``doctor`` and ``sim run --store``.

Imports from sim: ``scenario`` (the plan) and ``check`` (operations, to say what a fault
did).
"""
