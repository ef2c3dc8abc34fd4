"""The dashboard over real HTTP (no browser): GET only, read-only, the token when set."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import httpx2
import pytest

from agents_room.dashboard.web import MAX_STREAMS, cookie_value
from agents_room.store import Store

from .conftest import EXE

pytestmark = pytest.mark.slow
TOKEN = "dashboard-token-for-tests"
PAGES = ["", "dashboard.css", "dashboard.js", "snapshot.json", "snapshot.json?room=team:x"]


def seeded(db: Path, repo: Path) -> Store:
    store = Store.open(db)
    a = store.room_join(cwd=str(repo), pid=os.getpid(), label="alice", room="team:x").session_id
    b = store.room_join(cwd=str(repo), pid=None, label="bob", room="team:x").session_id
    store.lease_claim(a, "README.md", ttl_s=1)  # expires while the page is watched: nothing may sweep it
    store.msg_send(a, b, subject="hello", body="there")
    return store


def first_snapshot(url: str, **kw: object) -> dict:
    with httpx2.stream("GET", url + "events", timeout=10, **kw) as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        event = None
        for line in response.iter_lines():
            if line.startswith("event:"):
                event = line.split(":", 1)[1].strip()
            elif line.startswith("data:") and event == "snapshot":
                return json.loads(line.split(":", 1)[1])
    raise AssertionError("no snapshot event")


def test_every_endpoint_reads_and_none_writes(tmp_path: Path, repo: Path, dashboard: Callable[..., str]) -> None:
    db = tmp_path / "room.db"
    store = seeded(db, repo)  # kept open: the dashboard's connection is never the last one to close
    url = dashboard(db)
    events, stat, wal = store.events(), db.stat(), Path(f"{db}-wal").stat().st_size

    time.sleep(1.2)  # past the lease's TTL: a writer would sweep it now
    for page in PAGES:
        response = httpx2.get(url + page, timeout=10)
        assert response.status_code == 200, (page, response.text)
        assert "default-src 'none'" in response.headers["content-security-policy"]
    snap = first_snapshot(url)
    assert [m["label"] for m in snap["members"]] == ["alice", "bob"] and snap["leases"] == []
    assert snap["messages"][0]["deliveries"][0]["state"] == "stored"
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        for page in ("", "events", "snapshot.json"):
            assert httpx2.request(method, url + page, timeout=10).status_code == 405, (method, page)
    assert httpx2.get(url + "nothing-here", timeout=10).status_code == 404
    assert httpx2.get(url + "snapshot.json?room=no%20spaces", timeout=10).status_code == 400
    after = db.stat()
    assert store.events() == events
    assert (after.st_size, after.st_mtime_ns) == (stat.st_size, stat.st_mtime_ns)
    assert Path(f"{db}-wal").stat().st_size == wal
    store.close()


def test_a_token_is_required_when_set_and_a_wrong_one_is_refused(
    tmp_path: Path, repo: Path, dashboard: Callable[..., str]
) -> None:
    db = tmp_path / "room.db"
    seeded(db, repo).close()
    url = dashboard(db, token=TOKEN)
    cookie = f"agents_room_dashboard_{url.rsplit(':', 1)[1].strip('/')}"
    for page in ("", "events", "snapshot.json", "dashboard.js"):
        assert httpx2.get(url + page, timeout=10).status_code == 401, page
        assert httpx2.get(url + page, headers={"Authorization": "Bearer wrong"}, timeout=10).status_code == 401
        assert httpx2.get(url + page, cookies={cookie: "wrong"}, timeout=10).status_code == 401
        assert httpx2.get(url + page, cookies={cookie: TOKEN}, timeout=10).status_code == 401  # not the token
    assert httpx2.get(url + "?token=wrong", timeout=10).status_code == 401
    assert httpx2.get(url + "snapshot.json", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10).status_code == 200
    # the browser's way in: the token once in the address, then a cookie (and a clean address)
    with httpx2.Client(timeout=10) as browser:
        landing = browser.get(url + f"?token={TOKEN}")
        assert landing.status_code == 303 and landing.headers["location"] == "/"
        assert "httponly" in landing.headers["set-cookie"].lower()
        held = browser.cookies[cookie]
        assert TOKEN not in held and held == cookie_value(TOKEN)  # derived: no bearer of serve --http
        assert browser.get(url).status_code == 200
        assert first_snapshot(url, cookies={cookie: held})["seq"] > 0
        # Another local app's cookies, one of them malformed, beside ours: still let in.
        other = f'other="unclosed; bad name=1; {cookie}={held}; {{json}}={{"a":1}}'
        assert httpx2.get(url + "snapshot.json", headers={"Cookie": other}, timeout=10).status_code == 200


def test_event_streams_are_capped(tmp_path: Path, repo: Path, dashboard: Callable[..., str]) -> None:
    """MAX_STREAMS open streams: one more is refused with 503; a closed one frees its place."""
    from contextlib import ExitStack

    db = tmp_path / "room.db"
    seeded(db, repo).close()
    url = dashboard(db)
    with ExitStack() as stack, httpx2.Client(timeout=30, limits=httpx2.Limits(max_connections=MAX_STREAMS + 2)) as c:
        opened = [stack.enter_context(c.stream("GET", url + "events")) for _ in range(MAX_STREAMS)]
        assert all(r.status_code == 200 for r in opened)
        with c.stream("GET", url + "events") as refused:
            assert refused.status_code == 503
            assert "event streams are open already" in json.loads(refused.read())["error"]
        opened[0].close()
        assert c.get(url + "snapshot.json").status_code == 200  # the rest of the page is no stream
        deadline = time.monotonic() + 30
        while True:  # the server learns of the close when it next writes: wait for that
            with c.stream("GET", url + "events") as one:
                if one.status_code == 200:
                    break
            assert time.monotonic() < deadline, "the closed stream's place never came back"
            time.sleep(0.2)


def test_a_foreign_host_header_is_refused_on_loopback(tmp_path: Path, repo: Path,
                                                      dashboard: Callable[..., str]) -> None:
    db = tmp_path / "room.db"
    seeded(db, repo).close()
    url = dashboard(db)
    assert httpx2.get(url, headers={"Host": "evil.example:80"}, timeout=10).status_code == 400
    assert httpx2.get(url, headers={"Host": "localhost"}, timeout=10).status_code == 200


def test_the_command_refuses_what_it_must_in_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "AGENTS_ROOM_DB": str(tmp_path / "none" / "room.db")}
    env.pop("AGENTS_ROOM_TOKEN", None)
    missing = subprocess.run([EXE, "dashboard"], env=env, capture_output=True, text=True, timeout=60)
    assert missing.returncode == 1 and "there is no store" in missing.stderr and not (tmp_path / "none").exists()
    exposed = subprocess.run([EXE, "dashboard", "--http", "0.0.0.0:8766"], env=env, capture_output=True, text=True,
                             timeout=60)
    assert exposed.returncode == 1 and "without a token" in exposed.stderr
    assert len(exposed.stderr.strip().splitlines()) == 1
    bad = subprocess.run([EXE, "dashboard", "--http", "nowhere"], env=env, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and "--http" in bad.stderr and "Traceback" not in bad.stderr
