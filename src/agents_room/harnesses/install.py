"""``agents-room install claude-code|codex|cursor``: write the harness's MCP server entry and
hooks, merged into what is there (each harness's module says what it writes:
:mod:`.registry`; the merge rules: :mod:`.json_files`, :mod:`.codex`). It prints what it changed, "unchanged" for files it left alone, and with ``--dry-run`` the diff only.

Only the parser is built at import: ``agents-room hook`` runs on every harness event and
builds the same command line, so this module imports nothing it does not need for that.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from ..parser import not_empty
from .registry import HARNESSES

if TYPE_CHECKING:
    from pathlib import Path

    from .config_change import Change, Store


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "install", help="write a harness's MCP server entry and hooks (claude-code, codex, gemini, cursor)",
        description="Write or merge the agents-room MCP server entry and hooks into a harness's configuration. "
        "Other entries are kept; running it twice changes nothing. Claude Code: .mcp.json and "
        ".claude/settings.json (project), or ~/.claude.json and ~/.claude/settings.json (user). Codex: "
        "~/.codex/config.toml and ~/.codex/hooks.json. Gemini CLI: .gemini/settings.json (or ~/.gemini/settings.json). Cursor: "
        ".cursor/mcp.json and .cursor/hooks.json (or under ~/.cursor).",
    )
    p.add_argument("harness", choices=list(HARNESSES))
    p.add_argument("--scope", choices=["project", "user"], help="default: project (user for codex)")
    p.add_argument("--dry-run", action="store_true", help="print the changes as a diff; write nothing")
    p.add_argument("--dir", metavar="PATH", type=folder, help="the project folder (default: the current folder)")
    p.add_argument("--command", metavar="PATH", type=not_empty,
                   help="the agents-room executable the MCP server entry runs (default: found on PATH); "
                   "hooks run this installation's interpreter on its hook entry")
    p.add_argument("--channel", action="store_true",
                   help="claude-code: turn on the channel wake lever (start claude with "
                   "--dangerously-load-development-channels server:room)")
    p.add_argument("--edits", choices=["claim", "check", "off"], default="claim",
                   help="the edit guard on the harness's file-writing tools: claim (default) denies an edit of a "
                   "file another session holds and leases it to the editor; check only denies; off installs none")
    p.set_defaults(run=run)
    return p


def folder(text: str) -> str:
    """An argparse type: an existing folder (install never creates the project folder: a
    mistyped --dir would get a configuration nobody reads)."""
    if not os.path.exists(text):
        raise argparse.ArgumentTypeError(f"{text!r} does not exist")
    if not os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a folder")
    return text


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from . import editguard_install
    from .config_change import InstallError
    from .registry import harness, plan

    module = harness(args.harness)
    scope = args.scope or module.SCOPE
    try:
        check_store_location(getattr(args, "db", None))
        changes = plan(args.harness, scope, Path(args.dir or os.getcwd()).absolute(),
                       Path(os.path.expanduser("~")), executable(args.command, by_name=module.by_name(scope)),
                       hook_command(), channel=args.channel, store=store_setting(getattr(args, "db", None)))
        changes = editguard_install.extend(changes, args.harness, scope, Path(args.dir or os.getcwd()).absolute(),
                                           Path(os.path.expanduser("~")), getattr(args, "edits", "claim"),
                                           store_setting(getattr(args, "db", None)))
        if not args.dry_run:
            private_folders(changes, Path(os.path.expanduser("~")))
        report(changes, dry_run=args.dry_run)
        keep_out_of_git(changes, Path(args.dir or os.getcwd()).absolute(), dry_run=args.dry_run)
        on_path = bool(args.command) or executable(None) == "agents-room"
        for note in module.notes(scope, dry_run=args.dry_run, on_path=on_path):
            print(note)
    except InstallError as exc:
        print(f"agents-room install: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        raise  # the reader of the output left: cli.main says nothing
    except OSError as exc:  # a folder that cannot be written, a file that cannot be read
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"agents-room install: {where}{exc.strerror or exc}; nothing more was written", file=sys.stderr)
        return 1
    return 0


def store_setting(given: str | None) -> Store | None:
    """The store location to write, resolved as every command resolves it (``--db``, else
    ``$AGENTS_ROOM_DB``; a relative path or an unknown scheme is refused, store/location.py):
    None for the default (every machine resolves it alike, so nothing is written); a path under
    the home folder as ``~/...`` (agents-room expands ``~`` itself, so it means the same on a
    teammate's machine); any other path, or a URL, as it is, machine-specific."""
    from pathlib import Path

    from ..store import StoreError
    from ..store.location import SQLITE, default_sqlite_path, resolve
    from .config_change import InstallError, Store

    try:
        location = resolve(given, source="--db") if given else resolve()
    except StoreError as exc:
        raise InstallError(exc.text) from None
    if location.source == "default" or (location.engine == SQLITE and location.path == default_sqlite_path()):
        return None
    if location.engine != SQLITE:
        return Store(location.target, portable=False)
    try:
        return Store(f"~/{location.path.relative_to(Path.home())}", portable=True)
    except ValueError:
        return Store(location.target, portable=False)


def check_store_location(given: str | None) -> None:
    """Refuse, before anything is written, a store location where no store can ever be made on
    this machine (a folder on the way that is a file, a folder nothing can be made in:
    store/location.py, ``unusable``): the agent's server would fail to start there. A
    location with no store yet is fine: the first join or ``agents-room send`` makes it."""
    from ..store import StoreError
    from ..store.location import resolve, unusable
    from .config_change import InstallError

    try:
        location = resolve(given, source="--db") if given else resolve()
    except StoreError as exc:
        raise InstallError(exc.text) from None
    problem = unusable(location)
    if problem:
        raise InstallError(f"no store can be made at {location} ({location.origin}): {problem}; nothing was written")


def keep_out_of_git(changes: list[Change], root: Path, *, dry_run: bool) -> None:
    """Keep each machine-only file install wrote inside the project (audience ``LOCAL``, e.g.
    ``.claude/settings.local.json``: absolute paths of this installation) out of git, by a line
    in the clone's ``.git/info/exclude`` (``git rev-parse --git-path``: a worktree's is its
    main clone's). Not ``.gitignore``: that file is committed, so keeping one machine's file
    out would itself be a change to commit for everyone; the exclude file is this clone's own.
    A file git already ignores (a ``.gitignore`` line the team prefers, a global ignore) is
    left alone, and so is a project that is no git work tree. A file git already tracks is
    named, since no ignore rule untracks it."""
    import subprocess
    from pathlib import Path

    from .config_change import LOCAL

    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=False,
                              stdin=subprocess.DEVNULL)

    local = [c.path for c in changes if c.audience == LOCAL and c.path.is_relative_to(root)]
    if not local:
        return
    try:
        top = git("rev-parse", "--show-toplevel")
    except OSError:  # no git on this machine: nothing to keep anything out of
        return
    if top.returncode != 0:
        return
    base = Path(os.path.realpath(top.stdout.strip()))
    for path in local:
        if not dry_run and not path.exists():
            continue
        rel = Path(os.path.realpath(path.parent), path.name).relative_to(base).as_posix()
        if git("check-ignore", "-q", "--no-index", rel).returncode == 0:
            continue
        exclude = root / git("rev-parse", "--git-path", "info/exclude").stdout.strip()
        line = "/" + "".join("\\" + ch if ch in "*?[\\#!" else ch for ch in rel)
        if dry_run:
            print(f"would add {line} to {exclude}: {path} is this machine's only; git would not show it")
            continue
        exclude.parent.mkdir(parents=True, exist_ok=True)
        before = exclude.read_text() if exclude.exists() else ""
        with exclude.open("a") as f:
            f.write(("" if not before or before.endswith("\n") else "\n") + line + "\n")
        print(f"kept out of git: {path} ({line} added to {exclude}, this clone's own ignore list)")
        if git("ls-files", "--error-unmatch", rel).returncode == 0:
            print(f"    {rel} is already tracked: `git rm --cached {rel}` keeps it on disk and out of the next commit")


def executable(given: str | None, *, by_name: bool = True) -> str:
    """``agents-room`` when that name on PATH is this installation and ``by_name`` allows it
    (a file a team commits), else the absolute path of this installation's script: the one
    found on PATH when it is this installation (a link the user keeps up to date), else its
    own. A harness may start with another PATH than the shell that ran install."""
    import shutil
    from pathlib import Path

    if given:
        return given
    here = Path(sys.argv[0]).absolute() if Path(sys.argv[0]).name == "agents-room" else None
    here = here or Path(sys.executable).parent / "agents-room"
    found = shutil.which("agents-room")
    if found and here.exists() and Path(found).resolve() == here.resolve():
        return "agents-room" if by_name else str(Path(found).absolute())
    return str(here)


def hook_command() -> str:
    """The hook command for the harness's shell: this installation's interpreter, without
    ``site``, on its hook entry (agents_room/hook_entry.py says why), so each hook event costs little more
    than the interpreter's bare start. It does the same as ``agents-room hook``. The lines each
    harness module writes around it: :mod:`.hook_line`."""
    from .hook_line import lean

    return lean()


def private_folders(changes: list[Change], home: Path) -> None:
    """``~/.agents-room``, where the launcher goes (:func:`.config_change.launcher_change`), is
    also the default store's folder, which the store keeps private (0700,
    store/sqlite/opening.py): created so here when the launcher comes first."""
    from .hook_line import LAUNCHER

    folder = home / LAUNCHER.rpartition("/")[0]
    if any(c.changed and c.path.parent == folder for c in changes):
        os.makedirs(folder, mode=0o700, exist_ok=True)


def report(changes: list[Change], *, dry_run: bool) -> None:
    import difflib

    for c in changes:
        if not c.changed:
            print(f"unchanged: {c.path}")
            continue
        verb = "would write" if dry_run else ("created" if c.before is None else "updated")
        if not dry_run:
            try:
                c.path.parent.mkdir(parents=True, exist_ok=True)
                tmp = c.path.with_name(f".{c.path.name}.agents-room.tmp")
                tmp.write_text(c.after)
                if c.path.exists():
                    os.chmod(tmp, c.path.stat().st_mode & 0o7777)
                os.replace(tmp, c.path)  # atomic: the harness never reads half a file
            except OSError as exc:  # named by the file meant, not by the temporary one
                raise OSError(exc.errno, exc.strerror, str(c.path)) from None
        print(f"{verb}: {c.path} ({'; '.join(c.notes)})" + (f"\n    {c.audience}" if c.audience else ""))
        if dry_run:
            sys.stdout.writelines(difflib.unified_diff(
                (c.before or "").splitlines(keepends=True), c.after.splitlines(keepends=True),
                fromfile=str(c.path) if c.before is not None else "/dev/null", tofile=str(c.path),
            ))
    if all(not c.changed for c in changes):
        print("nothing to change")
