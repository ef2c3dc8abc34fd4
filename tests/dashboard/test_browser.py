"""The dashboard in a real browser: Debian's headless Chromium driven by Playwright, against a
real ``agents-room dashboard`` process, with changes made through a real MCP server over
stdio or through the store. Skipped only where there is no Chromium and CI is unset."""

from __future__ import annotations

import os
import tempfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from agents_room.store import Store

from .conftest import EXE

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]
SEEN_S = 2.0  # a change must show on the page within this

pytestmark = [
    pytest.mark.slow, pytest.mark.anyio,
    pytest.mark.skipif(not os.path.exists(CHROMIUM) and not os.environ.get("CI"),
                       reason=f"no {CHROMIUM} (apt-get install chromium); under CI=true this fails instead"),
]


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"  # Playwright's async API runs on asyncio


@pytest.fixture(scope="module")
async def browser(anyio_backend: str) -> AsyncIterator[Any]:
    """One headless Chromium for the module, with its own fresh profile."""
    from playwright.async_api import async_playwright

    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        async with async_playwright() as pw:
            context = await pw.chromium.launch_persistent_context(
                profile, executable_path=CHROMIUM, args=ARGS, headless=True, viewport={"width": 1400, "height": 900})
            yield context
            await context.close()


@pytest.fixture
async def page(browser: Any) -> AsyncIterator[Any]:
    page = await browser.new_page()
    page.ran = []  # anything a hostile label manages to run, or the page's own errors
    page.on("dialog", lambda d: (page.ran.append(f"dialog {d.message}"), d.dismiss()))
    page.on("pageerror", lambda e: page.ran.append(f"pageerror {e}"))
    yield page
    await page.close()


def agent(db: Path, cwd: Path) -> StdioServerParameters:
    return StdioServerParameters(command=EXE, args=["serve"], env={"AGENTS_ROOM_DB": str(db)}, cwd=str(cwd))


async def ok(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content
    return result.structured_content


async def test_a_lease_claimed_over_mcp_shows_with_its_holder_and_goes_on_release(
    tmp_path: Path, repo: Path, dashboard: Callable[..., str], page: Any
) -> None:
    from playwright.async_api import expect

    db = tmp_path / "room.db"
    Store.open(db).close()
    await page.goto(dashboard(db))
    await expect(page.locator("#status")).to_have_attribute("data-state", "live")
    async with Client(agent(db, repo)) as client:
        me = (await ok(client, "room_join", label="lease-holder", room="team:x"))["session_id"]
        granted = await ok(client, "lease_claim", session_id=me, path="README.md", ttl_s=120)
        assert granted["ok"]
        row = page.locator(f'#leases tr[data-path="{repo / "README.md"}"]')
        await expect(row).to_be_visible(timeout=SEEN_S * 1000)
        await expect(row.locator(".holder")).to_have_text("lease-holder")
        await expect(row).to_have_attribute("data-holder", me)
        await expect(row.locator(".badge")).to_have_text("exclusive")
        await expect(page.locator(f'#members tr[data-session="{me}"] .label')).to_have_text("lease-holder")
        await ok(client, "lease_release", session_id=me, path="README.md")
        await expect(row).to_have_count(0, timeout=SEEN_S * 1000)
        await expect(page.locator(f'#timeline .lane[data-path="{repo / "README.md"}"] .span')).to_have_count(1)
    assert page.ran == []


async def test_a_delivery_moves_to_read_then_acked_on_the_page(
    tmp_path: Path, repo: Path, dashboard: Callable[..., str], page: Any
) -> None:
    from playwright.async_api import expect

    db = tmp_path / "room.db"
    with Store.open(db) as store:
        a = store.room_join(cwd=str(repo), pid=None, label="sender").session_id
        b = store.room_join(cwd=str(repo), pid=None, label="reader").session_id
        sent = store.msg_send(a, b, subject="please read", body="and ack")
        await page.goto(dashboard(db))
        chip = page.locator(f'#messages [data-message="{sent.message_id}"] .chip[data-recipient="{b}"]')
        await expect(chip).to_have_attribute("data-state", "stored", timeout=SEEN_S * 1000)
        await expect(page.locator(f'#members tr[data-session="{b}"] .unread')).to_have_text("1")
        store.msg_recv(b)
        await expect(chip).to_have_attribute("data-state", "read", timeout=SEEN_S * 1000)
        await expect(page.locator(f'#members tr[data-session="{b}"] .unread')).to_have_text("0")
        store.msg_ack(b, sent.message_id)
        await expect(chip).to_have_attribute("data-state", "acked", timeout=SEEN_S * 1000)
        await expect(chip).to_have_text("reader: acked")
    assert page.ran == []


async def test_hostile_text_shows_as_text_and_runs_nothing(
    tmp_path: Path, repo: Path, dashboard: Callable[..., str], page: Any
) -> None:
    from playwright.async_api import expect

    label = '<img src=x onerror="window.pwned=1;alert(1)">'
    subject = "<script>window.pwned=2</script>"
    body = '<b onmouseover="window.pwned=3">bold?</b><iframe src="javascript:alert(3)"></iframe>'
    db = tmp_path / "room.db"
    with Store.open(db) as store:
        me = store.room_join(cwd=str(repo), pid=None, label=label, room="team:x").session_id
        other = store.room_join(cwd=str(repo), pid=None, label="peer", room="team:x").session_id
        store.lease_claim(me, '<svg onload="window.pwned=4">.py', ttl_s=60)
        store.msg_send(me, other, subject=subject, body=body)
        await page.goto(dashboard(db))
        await expect(page.locator(f'#members tr[data-session="{me}"] .label')).to_have_text(label)
        await expect(page.locator("#messages .subject")).to_have_text(subject)
        await expect(page.locator("#messages .body")).to_have_text(body)
        await expect(page.locator("#leases .holder")).to_have_text(label)
        await page.hover("#messages .body")
        await page.wait_for_timeout(300)
    assert await page.evaluate("window.pwned") is None
    assert await page.locator("main img, main script, main iframe, main svg, main b").count() == 0
    assert page.ran == []


async def test_a_wrong_token_is_refused_and_the_right_one_lets_the_page_live(
    tmp_path: Path, repo: Path, dashboard: Callable[..., str], page: Any
) -> None:
    from playwright.async_api import expect

    db = tmp_path / "room.db"
    with Store.open(db) as store:
        store.room_join(cwd=str(repo), pid=None, label="someone")
    url = dashboard(db, token="the-right-token")
    assert (await page.goto(url)).status == 401
    assert (await page.goto(url + "?token=a-wrong-token")).status == 401
    assert await page.locator("#members").count() == 0
    landed = await page.goto(url + "?token=the-right-token")
    assert landed.status == 200 and page.url == url  # the token left the address bar
    await expect(page.locator("#members .label")).to_have_text("someone", timeout=SEEN_S * 1000)
    await expect(page.locator("#status")).to_have_attribute("data-state", "live")


async def test_a_directory_lease_shows_as_one_row_marked_as_a_directory(
    tmp_path: Path, repo: Path, dashboard: Callable[..., str], page: Any
) -> None:
    from playwright.async_api import expect

    db = tmp_path / "room.db"
    Store.open(db).close()
    (repo / "src" / "api").mkdir(parents=True)
    (repo / "src" / "api" / "x.py").write_text("x = 1\n")
    await page.goto(dashboard(db))
    async with Client(agent(db, repo)) as client:
        me = (await ok(client, "room_join", label="refactor"))["session_id"]
        assert (await ok(client, "lease_claim", session_id=me, path="src/api", ttl_s=120))["ok"]
        await ok(client, "lease_claim", session_id=me, path="README.md", ttl_s=120)
        row = page.locator(f'#leases tr[data-path="{repo}/src/api/"]')
        await expect(row).to_be_visible(timeout=SEEN_S * 1000)
        await expect(row).to_have_attribute("data-directory", "1")
        await expect(row.locator('.badge[data-kind="directory"]')).to_have_text("dir")
        await expect(row.locator(".path")).to_contain_text("api/")
        await expect(page.locator("#leases tr")).to_have_count(2)
        await expect(page.locator('#leases tr[data-directory="1"]')).to_have_count(1)
        # a lease the edit guard took at an edit is marked so; the model's own leases are not
        (repo / "notes.txt").write_text("n\n")
        with Store.open(db) as store:
            assert store.edit_claim(cwd=str(repo), files=["notes.txt"], harness="claude-code").ok
        edited = page.locator(f'#leases tr[data-path="{repo}/notes.txt"]')
        await expect(edited.locator('.badge[data-kind="at-edit"]')).to_have_text("at an edit", timeout=SEEN_S * 1000)
        await expect(page.locator('#leases .badge[data-kind="at-edit"]')).to_have_count(1)
    assert page.ran == []
