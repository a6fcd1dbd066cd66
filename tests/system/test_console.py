"""The web console in a real headless Chromium, against a real server with the real model.

Each step is saved as a screenshot under the test's temporary folder; with
``CONSOLE_SCREENSHOT=docs/console.png`` the search step also refreshes the
README's picture.
"""

from __future__ import annotations

import json
import os
import shutil
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.live import LiveServer, live_server_with_key, unavailable

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
LAUNCH_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
HOSTILE_NAME = '<img src=x onerror="window.__pwned=1">Billing & <b>co</b>'
MEMORY = "/_plugins/_ml/memory"
HISTORIES = "/v2/ai/conversation_histories"
SEARCH = [
    ("q", "customer was charged twice on the invoice"),
    ("record_type", "voice"),
    ("top_k", "5"),
    ("filter[language]", "en"),
    ("filter[record_created_at][gte]", "2026-02-01T00:00:00Z"),
    ("filter[user_id][in]", "user-1,user-2"),
]


def call(
    server: LiveServer,
    method: str,
    path: str,
    body: Any = None,
    params: list[tuple[str, str]] | None = None,
    token: str | None = None,
) -> tuple[int, Any]:
    url = server.url + path + ("?" + urllib.parse.urlencode(params) if params else "")
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Authorization": f"Bearer {token or server.token}", "Content-Type": "application/json"}
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = live_server_with_key(
        tmp_path_factory.mktemp("console") / "data", "org-console", None
    )  # org-wide: may write any user's records
    yield live
    live.kill()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not os.path.exists(CHROMIUM):
        unavailable("chromium is not installed (apt-get install chromium; make test installs it)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("playwright is not installed (pip install -c constraints.txt -e '.[test]')")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=LAUNCH_FLAGS)
        yield browser
        browser.close()


def seed(server: LiveServer) -> dict[str, Any]:
    """Two memories (one named like an attack), messages with a trace, and history records."""
    _, billing = call(server, "POST", MEMORY, {"name": "Billing"})
    memory_id = billing["memory_id"]
    _, first = call(
        server,
        "POST",
        f"{MEMORY}/{memory_id}/messages",
        {
            "input": "Why was I charged twice?",
            "response": "A duplicate authorisation; it drops in 3 days.",
            "origin": "RAG Pipeline",
        },
    )
    call(
        server,
        "POST",
        f"{MEMORY}/{memory_id}/messages",
        {
            "input": "lookup invoice 1042",
            "response": "invoice 1042: two holds",
            "origin": "tool",
            "parent_message_id": first["message_id"],
            "trace_number": 1,
        },
    )
    _, hostile = call(server, "POST", MEMORY, {"name": HOSTILE_NAME})
    topics = ["charged twice on the invoice", "the router dropping wifi", "a parcel that never arrived", "a refund"]
    records = [
        {
            "record_id": f"rec-{i}",
            "record_type": "voice",
            "region": ["USA", "DEU"][i % 2],
            "user_id": f"user-{i % 3}",
            "text": f"The customer called about {topics[i % 4]}. Case {i}.",
            "record_created_at": f"2026-0{1 + i % 5}-15T10:00:00Z",
            "metadata": {"language": ["en", "de"][i // 10 % 2]},
        }
        for i in range(20)
    ]
    status, _ = call(server, "POST", HISTORIES, {"records": records})
    assert status == 201
    return {"memory_id": memory_id, "message_id": first["message_id"], "hostile_id": hostile["memory_id"]}


def test_console_drives_the_api(server: LiveServer, browser: Any, tmp_path: Path) -> None:
    data = seed(server)
    shots = iter(range(1, 100))

    def shot(page: Any, name: str) -> Path:
        path = tmp_path / f"{next(shots):02d}-{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    problems: list[str] = []
    page.on(
        "console",
        lambda message: (
            problems.append(message.text)
            if message.type == "error" and "Failed to load resource" not in message.text
            else None
        ),
    )  # our 4xx steps
    page.on("pageerror", lambda error: problems.append(str(error)))

    # Loads without a key, shows nothing.
    response = page.goto(server.url + "/_console")
    assert response is not None and response.status == 200
    assert "script-src 'self'" in response.headers["content-security-policy"]
    page.wait_for_selector("#key")
    assert page.locator("#tabs").is_hidden() and page.locator("#memories").is_hidden()
    shot(page, "no-key")

    # A wrong key: the API's own 401 message, and still nothing shown.
    _, refused = call(server, "GET", "/", token="key_0000000000000000.wrong")
    page.fill("#key", "key_0000000000000000.wrong")
    page.press("#key", "Enter")
    page.wait_for_selector("#key-error:visible")
    assert page.locator("#key-error").inner_text() == f"401: {refused['error']['reason']}"
    assert page.locator("#tabs").is_hidden()
    assert page.evaluate("sessionStorage.getItem('memory_plugin.key')") is None
    shot(page, "wrong-key")

    # The right key: the memories, the hostile name as plain text, the status strip.
    page.fill("#key", server.token)
    page.click("#key-form button[type=submit]")
    page.wait_for_selector(f"tr[data-memory-id='{data['hostile_id']}']")
    hostile_row = page.locator(f"tr[data-memory-id='{data['hostile_id']}'] button.open")
    assert hostile_row.inner_text() == HOSTILE_NAME
    assert page.locator("#memory-table img, #memory-table b").count() == 0
    assert page.evaluate("window.__pwned") is None
    assert page.evaluate("sessionStorage.getItem('memory_plugin.key')") == server.token
    assert server.token not in page.url and not context.cookies()
    page.wait_for_selector("#status .chip >> text=health")
    status = page.locator("#status").inner_text()
    assert "version" in status and "3.9.0" in status and "green" in status
    # /_metrics is the operator's: a tenant key gets 403, and the strip says so instead of failing.
    assert "need an operator key" in status
    shot(page, "memories")

    # Open a memory: its messages, then the trace of the first one.
    page.click(f"tr[data-memory-id='{data['memory_id']}'] button.open")
    page.wait_for_selector(f"li.message[data-message-id='{data['message_id']}']")
    assert page.locator("#detail-name").inner_text() == "Billing"
    message = page.locator(f"li.message[data-message-id='{data['message_id']}']").first
    assert "Why was I charged twice?" in message.inner_text()
    message.get_by_role("button", name="Traces").click()
    page.wait_for_selector(".traces li.message")
    assert "invoice 1042: two holds" in message.locator(":scope > ol.traces").inner_text()
    shot(page, "memory-open")

    # A filtered search, every kind of filter row, checked against the API's own answer.
    page.get_by_role("tab", name="Search histories").click()
    page.fill("#q", dict(SEARCH)["q"])
    page.select_option("#record-type", "voice")
    page.fill("#top-k", "5")
    for name, value in SEARCH[3:]:
        field, _, op = name[len("filter[") : -1].partition("][")
        page.click("#add-filter")
        row = page.locator("#filters .filter-row").last
        row.locator(".filter-field").fill(field)
        row.locator(".filter-op").select_option(op or "eq")
        row.locator(".filter-value").fill(value)
    page.click("#search-form button[type=submit]")
    page.wait_for_selector("#search-meta >> text=results")
    status_code, expected = call(server, "GET", HISTORIES, params=[*SEARCH, ("page[number]", "1")])
    assert status_code == 200 and expected["data"], expected
    shown = page.locator("#results li.result").evaluate_all(
        "items => items.map(li => [li.dataset.recordId, li.querySelector('.score').textContent,"
        " li.querySelector('.chunk-text').textContent])"
    )
    assert shown == [[hit["record_id"], f"{hit['score']:.4f}", hit["text"]] for hit in expected["data"]]
    assert page.locator("#search-meta").inner_text().startswith(f"{expected['meta']['total_results']} results")
    assert page.locator("#failed-regions").is_hidden()
    assert "en" in page.locator("#results li.result .metadata").first.inner_text()
    search_shot = shot(page, "search")
    if os.environ.get("CONSOLE_SCREENSHOT"):
        shutil.copyfile(search_shot, os.environ["CONSOLE_SCREENSHOT"])

    # A bad search: the error as the API words it (Telnyx detail).
    page.locator("#filters .filter-row .filter-value").nth(1).fill("last tuesday")
    page.click("#search-form button[type=submit]")
    page.wait_for_selector("#search-error:visible")
    bad = [*SEARCH[:4], ("filter[record_created_at][gte]", "last tuesday"), *SEARCH[5:], ("page[number]", "1")]
    code, refused = call(server, "GET", HISTORIES, params=bad)
    assert code == 400
    assert page.locator("#search-error").inner_text() == f"400: {refused['errors'][0]['detail']}"
    shot(page, "search-error")

    # Delete a memory from the page, after confirming; the API no longer has it.
    page.get_by_role("tab", name="Memories").click()
    page.click(f"tr[data-memory-id='{data['memory_id']}'] button.delete")
    page.wait_for_selector("#confirm-delete[open]")
    assert page.locator("#confirm-name").inner_text() == "Billing"
    shot(page, "confirm-delete")
    page.click("#confirm-delete button[value=delete]")
    page.wait_for_selector(f"tr[data-memory-id='{data['memory_id']}']", state="detached")
    assert call(server, "GET", f"{MEMORY}/{data['memory_id']}")[0] == 404
    assert page.locator(f"tr[data-memory-id='{data['hostile_id']}']").count() == 1
    shot(page, "deleted")

    # Keyboard: arrow keys move between the tabs.
    page.get_by_role("tab", name="Memories").focus()
    page.keyboard.press("ArrowRight")
    assert page.locator("#search").is_visible() and page.locator("#memories").is_hidden()

    # A narrow screen: no sideways scrolling.
    page.set_viewport_size({"width": 380, "height": 800})
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
    shot(page, "narrow")

    assert page.evaluate("window.__pwned") is None
    assert problems == [], problems
    context.close()


def test_the_pages_choices_are_the_apis() -> None:
    """Record types, regions, filter fields and operators in the page match the server's own lists."""
    from html.parser import HTMLParser
    from importlib import resources

    from memory_plugin.histories.stores.filters import OPERATORS, TOP_LEVEL_FIELDS
    from memory_plugin.histories.stores.records import RECORD_TYPES
    from memory_plugin.settings import REGIONS

    class Options(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.lists: dict[str, list[str]] = {}
            self.current: str | None = None
            self.text = ""

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            named = dict(attrs)
            if tag in ("select", "datalist"):
                self.current = named.get("id") or named.get("class")
                self.lists[str(self.current)] = []
            elif tag == "option" and self.current:
                self.text = ""
                if named.get("value") is not None:
                    self.lists[str(self.current)].append(str(named["value"]))
                    self.text = "\0"

        def handle_data(self, data: str) -> None:
            if self.current and self.text != "\0":
                self.text += data

        def handle_endtag(self, tag: str) -> None:
            if tag == "option" and self.current and self.text not in ("\0", ""):
                self.lists[str(self.current)].append(self.text.strip())
            if tag in ("select", "datalist"):
                self.current = None

    parser = Options()
    parser.feed(resources.files("memory_plugin.console").joinpath("index.html").read_text())
    assert parser.lists["record-type"] == list(RECORD_TYPES)
    assert parser.lists["region"] == ["", *REGIONS]
    assert parser.lists["filter-fields"] == list(TOP_LEVEL_FIELDS)
    assert parser.lists["filter-op"] == list(OPERATORS)
