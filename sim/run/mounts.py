"""A run's bind mounts ([[repos]] bind_mounts): one folder mounted at a second place, as a
checkout mounted into a second tree (``mount --bind /data/work /home/u/work``) or a
container's volume is. The kernel gives both names one device and inode, and realpath cannot
see the mount: the store must hold such a file to one lease by its identity.

The mounts live in a mount namespace of the run's own (``unshare --mount --propagation
private``), made by a small holder process that mounts each repository that asks, at
``bound/<name>`` of the run's folder, and then waits on its stdin; every agent of the run
enters it (``nsenter -m``), as the simulated hosts' processes enter theirs (sim/hosts/pidns.py),
so every agent sees both names, and the agents at the end of such a repository's list work
through the mounted one. The holder ends when the runner closes its stdin or dies; the
namespace, and with it every mount, ends with the last process in it. The host's namespace
never holds one: ``bound/<name>`` stays an empty folder there.

Where no mount namespace can be made (not root), the run says so once and goes without the
class; with ``AGENTS_ROOM_REQUIRE_MOUNTS=1`` (as CI, which runs as root, may set) that is an error.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

REQUIRE_ENV = "AGENTS_ROOM_REQUIRE_MOUNTS"
BOUND = "bound"  # the run's folder of mount points: bound/<repo>, named as the repository (its repo room)

# The holder: each (source, target) bound, then "ready", then wait for stdin's end.
HOLD = ("import json, subprocess, sys\n"
        "for source, target in json.loads(sys.argv[1]):\n"
        "    subprocess.run(['mount', '--bind', source, target], check=True)\n"
        "print('ready', flush=True)\n"
        "sys.stdin.read()\n")


# In the namespace: into the folder, then the command.
_CHDIR = "import os, sys; os.chdir(sys.argv[1]); os.execvp(sys.argv[2], sys.argv[2:])"


class MountsUnavailable(RuntimeError):
    """No mount namespace could be made here, and the run was required to have one."""


def targets(out: Path, names: Sequence[str]) -> list[tuple[str, str]]:
    """(repository, mount point) of each of ``names``, absolute."""
    return [(os.path.realpath(out / "repos" / name), str(out / BOUND / name)) for name in names]


class MountSpace:
    """The run's mount namespace, while its holder lives."""

    def __init__(self, holder: subprocess.Popen) -> None:
        self.holder = holder

    @classmethod
    def make(cls, binds: Sequence[tuple[str, str]]) -> MountSpace | None:
        """The namespace with ``binds`` mounted in it; None (said once on stderr) where it
        cannot be made, or :class:`MountsUnavailable` when ``AGENTS_ROOM_REQUIRE_MOUNTS=1``."""
        for _, target in binds:
            Path(target).mkdir(parents=True, exist_ok=True)
        why = ""
        try:
            holder = subprocess.Popen(
                ["unshare", "--mount", "--propagation", "private", "--", sys.executable, "-c", HOLD, json.dumps(binds)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                start_new_session=True)
        except OSError as exc:
            why = f"unshare: {exc.strerror}"
        else:
            assert holder.stdout is not None
            if holder.stdout.readline().strip() == "ready":
                return cls(holder)
            holder.kill()
            _, err = holder.communicate()
            why = (err.strip().splitlines() or [f"exit {holder.returncode}"])[-1]
        text = f"bind mounts: no mount namespace could be made ({why}); the run goes without them"
        if os.environ.get(REQUIRE_ENV) == "1":
            raise MountsUnavailable(f"{text}, and {REQUIRE_ENV}=1 requires them")
        print(text, file=sys.stderr, flush=True)
        return None

    def command(self, argv: list[str], cwd: str | Path) -> list[str]:
        """``argv`` run in the namespace, in ``cwd`` as the namespace sees it (``nsenter --wd``
        opens its folder before it enters: the empty mount point of the host's namespace)."""
        return ["nsenter", "-t", str(self.holder.pid), "-m", "--", sys.executable, "-c", _CHDIR, str(cwd), *argv]

    def close(self) -> None:
        """The holder ends; the namespace with the last agent in it."""
        with contextlib.suppress(OSError):
            if self.holder.stdin is not None:
                self.holder.stdin.close()
        try:
            self.holder.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.holder.kill()
            self.holder.wait()
        for pipe in (self.holder.stdout, self.holder.stderr):
            if pipe is not None:
                pipe.close()
