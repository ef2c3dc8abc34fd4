"""Simulated hosts: a run's agents on several Linux hosts, made of namespaces on this one.

- ``net``: the network: one bridge, a network namespace per host and one for the database,
  veth links, addresses from 198.18.0.0/15 only; cutting a host off the database (iptables
  DROP inside its namespace) and healing it; the registry of what a run made, reaped at the
  next start when a runner died without cleaning up;
- ``pidns``: a host's PID namespace (``unshare --pid --fork --mount-proc``, so its ``/proc``
  shows only its own processes) and the command that runs a process on the host (inside its
  network, mount and PID namespaces);
- ``pgserver``: a throwaway PostgreSQL cluster started inside the database's namespace,
  listening on its 198.18 address; killed, restarted, paused and continued by the nemesis;
- ``cluster``: all of it for one run (``Hosts``), made and torn down as one, also on Ctrl-C.

Everything here needs root; :func:`cluster.refusal` says so in one line without it.

Imports from sim: ``scenario`` (the ``[hosts]`` table).
"""
