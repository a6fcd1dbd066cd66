"""The web console in a real headless Chromium, against a real server with the real model.

Each step is saved as a screenshot under the test's temporary folder; with
``CONSOLE_SCREENSHOT=docs/console.png`` the search step also refreshes the
picture in docs/console.md, and with ``CONSOLE_SCREENSHOTS=docs`` the agentic test writes
its views there as ``console-agentic-*.png``.  The server's agentic LLM is a
scripted local chat-completions server (``tests/support/agentic_llm.py``).
"""

from __future__ import annotations

import json
import os
import shutil
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from embedder import ensure_default_model
from memory_plugin.auth import KeyStore
from tests.support.agentic_llm import SEMANTIC_CONFIG, ScriptedLLM
from tests.support.live import LiveServer, live_server_with_key, served_in_thread, unavailable

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


@dataclass
class Console:
    """The server, its scripted LLM, and two user keys of its organisation beside its org-wide key."""

    server: LiveServer
    llm: ScriptedLLM
    alice: str  # holds the role "support"
    dave: str


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    data = tmp_path_factory.mktemp("console") / "data"
    keys = KeyStore(data / "keys.json")
    _, alice = keys.create("org-console", "alice", ("support",))
    _, dave = keys.create("org-console", "dave")
    llm = ScriptedLLM()
    with served_in_thread(llm.app()) as llm_url:
        env = {
            "MEMORY_PLUGIN_MODEL_DIR": str(ensure_default_model()),
            "MEMORY_PLUGIN_AGENTIC_LLM_URL": llm_url + "/v1/chat/completions",
            "MEMORY_PLUGIN_AGENTIC_LLM_MODEL": "scripted-model",
            "MEMORY_PLUGIN_AGENTIC_RETENTION_ENABLED": "true",
        }
        live = live_server_with_key(data, "org-console", None, env=env)  # org-wide: may write any user's records
        yield Console(live, llm, alice, dave)
        live.kill()


@pytest.fixture(scope="module")
def server(console: Console) -> LiveServer:
    return console.server


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
    status_code, expected = call(
        server, "GET", HISTORIES, params=[*SEARCH, ("mode", "semantic"), ("page[number]", "1")]
    )
    assert status_code == 200 and expected["data"], expected
    shown = page.locator("#results li.result").evaluate_all(
        "items => items.map(li => [li.dataset.recordId, li.querySelector('.score').textContent,"
        " li.querySelector('.chunk-text').textContent])"
    )
    assert shown == [[hit["record_id"], f"{hit['score']:.4f}", hit["text"]] for hit in expected["data"]]
    assert page.locator("#search-meta").inner_text().startswith(f"{expected['meta']['total_results']} semantic results")
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


# Records where the words and the meaning disagree: the query's only words any of them has are "every night", in a
# ticket the night shift closes, while by meaning the query is about the broadband that goes down after dark.
MODE_RECORDS = {
    "hist-night": "The night shift closes ticket INV-2291 every night.",
    "hist-broadband": "Our home broadband goes down after dark, the modem loses its connection.",
    "hist-twice": "The customer was billed twice for the same invoice and wants the duplicate charge refunded.",
    "hist-double": "A double charge appeared on the customer's invoice this month; billing will reverse it.",
    "hist-parcel": "The parcel never arrived and the tracking page shows no updates.",
    "hist-password": "The customer forgot the account password and asked for a reset link.",
}
MODE_QUERY = "my internet dies every night"


def test_histories_search_modes(server: LiveServer, browser: Any, tmp_path: Path) -> None:
    """Semantic, keyword and hybrid search in the page: what the API answers in that mode, scores as it scores."""
    records = [
        {
            "record_id": rid,
            "record_type": "message",
            "region": "USA",
            "text": text,
            "record_created_at": "2026-03-01T10:00:00Z",
        }
        for rid, text in MODE_RECORDS.items()
    ]
    status, ingested = call(server, "POST", HISTORIES, {"records": records})
    assert status == 201, ingested

    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.goto(server.url + "/_console")
    page.fill("#key", server.token)
    page.press("#key", "Enter")
    page.get_by_role("tab", name="Search histories").click()
    page.fill("#q", MODE_QUERY)
    page.select_option("#record-type", "message")
    page.fill("#top-k", "4")

    def run(mode: str, min_score: str = "") -> tuple[list[list[str]], list[dict[str, Any]]]:
        """The page's results for ``mode`` and the API's own answer to the same search."""
        page.select_option("#mode", mode)
        page.fill("#min-score", min_score)
        page.click("#search-form button[type=submit]")
        page.wait_for_selector(f"#search-meta >> text={mode} results")
        params = [("q", MODE_QUERY), ("record_type", "message"), ("mode", mode), ("top_k", "4")]
        code, expected = call(
            server, "GET", HISTORIES, params=params + ([("min_score", min_score)] if min_score else [])
        )
        assert code == 200 and expected["data"], expected
        shown = page.locator("#results li.result").evaluate_all(
            "items => items.map(li => [li.dataset.recordId, li.dataset.mode, li.querySelector('.score').textContent,"
            " li.querySelector('.score-kind').textContent])"
        )
        assert (
            page.locator("#search-meta").inner_text().startswith(f"{expected['meta']['total_results']} {mode} results")
        )
        page.screenshot(path=str(tmp_path / f"search-{mode}{'-min' if min_score else ''}.png"), full_page=True)
        return shown, expected["data"]

    ranked: dict[str, list[str]] = {}
    keyword_top = 0.0
    for mode, digits, kind in (("semantic", 4, "cosine"), ("keyword", 3, "BM25"), ("hybrid", 4, "hybrid")):
        shown, hits = run(mode)
        assert shown == [[hit["record_id"], mode, f"{hit['score']:.{digits}f}", kind] for hit in hits]
        ranked[mode] = [hit["record_id"] for hit in hits]
        if mode == "keyword":
            keyword_top = hits[0]["score"]
        else:
            assert all(0.0 <= hit["score"] <= 1.0 for hit in hits), hits
    # By meaning the broadband comes first; by the words only the night shift's ticket matches at all.
    assert ranked["semantic"][0] == "hist-broadband" and "hist-night" in ranked["semantic"], ranked
    assert ranked["keyword"] == ["hist-night"], ranked
    assert {"hist-broadband", "hist-night"} <= set(ranked["hybrid"]), ranked

    # min_score's input follows the mode: any BM25 score >= 0 in keyword mode, 0-1 otherwise.
    assert keyword_top > 1.0  # BM25, not 0-1
    page.select_option("#mode", "keyword")
    assert page.locator("#min-score").get_attribute("max") is None
    threshold = f"{keyword_top - 0.5:.2f}"
    shown, hits = run("keyword", threshold)
    assert shown == [[hit["record_id"], "keyword", f"{hit['score']:.3f}", "BM25"] for hit in hits]
    assert all(hit["score"] >= float(threshold) for hit in hits) and shown[0][0] == "hist-night"
    for mode in ("semantic", "hybrid"):
        page.select_option("#mode", mode)
        assert page.locator("#min-score").get_attribute("max") == "1"
        assert page.evaluate("document.querySelector('#min-score').validity.rangeOverflow")  # the browser refuses it
    # the results still say the mode they were searched in, not the one the form shows now
    assert page.locator("#search-meta").inner_text().startswith("1 keyword results")
    assert page.locator("#results li.result .score-kind").all_inner_texts() == ["BM25"]

    assert problems == [], problems
    context.close()


def test_the_pages_choices_are_the_apis() -> None:
    """Record types, regions, search modes, filter fields and operators in the page match the server's own lists."""
    from html.parser import HTMLParser
    from importlib import resources

    from memory_plugin.histories.service import SEARCH_MODES
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
    assert parser.lists["mode"] == list(SEARCH_MODES)
    assert parser.lists["filter-fields"] == list(TOP_LEVEL_FIELDS)
    assert parser.lists["filter-op"] == list(OPERATORS)


# -- agentic memory -------------------------------------------------------------------------

CONTAINERS = "/_plugins/_ml/memory_containers"
HOSTILE_FACT = "<script>window.__pwned=1</script>Bob wants replies by <b>email</b>"
HOSTILE_SUMMARY = '<img src=x onerror="window.__pwned=1">Moving house'
BERLIN = "Bob lives in Berlin"
HAMBURG = "Bob moved from Berlin to Hamburg"
PAGE_SIZE = 20  # console.js PAGE_SIZE


def eventually(check: Callable[[], Any], timeout: float = 60.0) -> Any:
    """``check()`` once it is truthy; its last value when ``timeout`` seconds pass first."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result or time.monotonic() > deadline:
            return result
        time.sleep(0.1)


def hits(server: LiveServer, token: str, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    status, found = call(server, "POST", path, body, token=token)
    assert status == 200, found
    return list(found["hits"]["hits"])


def text_message(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": [{"type": "text", "text": text}]}]


def seed_agentic(console: Console) -> dict[str, Any]:
    """Alice's container with four inferring adds over two sessions (one fact updated by the second session),
    a hostile fact and session summary; dave's container shared with the role alice holds; and a bulk container
    of 45 facts for paging."""
    server, llm, alice = console.server, console.llm, console.alice
    status, shared = call(
        server,
        "POST",
        f"{CONTAINERS}/_create",
        {"name": "Dave's triage", "backend_roles": ["support"], "configuration": SEMANTIC_CONFIG},
        token=console.dave,
    )
    assert status == 200, shared
    config = {
        **SEMANTIC_CONFIG,
        "retention_policy": {"sessions": {"retention_days": 30}, "long-term": {"max_count": 2}},
    }
    status, created = call(
        server,
        "POST",
        f"{CONTAINERS}/_create",
        {"name": "Support agent", "description": "tier 1 support", "configuration": config},
        token=alice,
    )
    assert status == 200, created
    cid = created["memory_container_id"]
    for session_id, summary in (("call-1", "Router trouble"), ("call-2", HOSTILE_SUMMARY)):
        body = {"session_id": session_id, "summary": summary, "namespace": {"user_id": "bob"}}
        assert call(server, "POST", f"{CONTAINERS}/{cid}/memories/sessions", body, token=alice)[0] == 200

    facts = {
        "My Fritzbox router drops the line every evening": ["Bob's Fritzbox router drops the line every evening"],
        "I live in Berlin": [BERLIN],
        "Please answer me by email, not by phone": [HOSTILE_FACT],
    }
    llm.facts = lambda kind, messages: facts.get(messages[-1]["content"][0]["text"], [])
    working: dict[str, str] = {}
    for text in facts:
        body = {"messages": text_message(text), "namespace": {"user_id": "bob", "session_id": "call-1"}, "infer": True}
        status, added = call(server, "POST", f"{CONTAINERS}/{cid}/memories", body, token=alice)
        assert status == 200, added
        working[text] = added["working_memory_id"]
    long_term = f"{CONTAINERS}/{cid}/memories/long-term/_search"
    everything = {"query": {"match_all": {}}, "size": 100}
    assert eventually(lambda: len(hits(server, alice, long_term, everything)) == 3)

    # the second session moves Bob: the LLM updates the Berlin fact
    def move(old: list[dict[str, Any]], new: list[str]) -> list[dict[str, Any]]:
        return [
            {"id": o["id"], "text": HAMBURG, "event": "UPDATE", "old_memory": o["text"]}
            if o["text"] == BERLIN
            else {"id": o["id"], "text": o["text"], "event": "NONE"}
            for o in old
        ]

    llm.facts, llm.decide = (lambda kind, messages: [HAMBURG]), move
    body = {"messages": text_message("We moved to Hamburg"), "namespace": {"user_id": "bob", "session_id": "call-2"}}
    status, added = call(server, "POST", f"{CONTAINERS}/{cid}/memories", {**body, "infer": True}, token=alice)
    assert status == 200, added
    working["We moved to Hamburg"] = added["working_memory_id"]

    def texts() -> list[str]:
        return sorted(hit["_source"]["memory"] for hit in hits(server, alice, long_term, everything))

    assert eventually(lambda: HAMBURG in texts()), texts()
    berlin = next(h["_id"] for h in hits(server, alice, long_term, everything) if h["_source"]["memory"] == HAMBURG)

    # a bulk container: one run extracts 45 facts
    status, bulk = call(
        server, "POST", f"{CONTAINERS}/_create", {"name": "Bulk import", "configuration": SEMANTIC_CONFIG}, token=alice
    )
    llm.facts = lambda kind, messages: [f"Imported fact number {i:02d}" for i in range(45)]
    body = {"messages": text_message("import"), "namespace": {"user_id": "carl", "session_id": "bulk"}, "infer": True}
    assert call(server, "POST", f"{CONTAINERS}/{bulk['memory_container_id']}/memories", body, token=alice)[0] == 200
    bulk_search = f"{CONTAINERS}/{bulk['memory_container_id']}/memories/long-term/_search"
    assert eventually(lambda: len(hits(server, alice, bulk_search, everything)) == 45)
    return {
        "cid": cid,
        "shared": shared["memory_container_id"],
        "bulk": bulk["memory_container_id"],
        "working": working,
        "berlin": berlin,
    }


def test_console_shows_agentic_memory(console: Console, browser: Any, tmp_path: Path) -> None:
    server, alice = console.server, console.alice
    data = seed_agentic(console)
    cid = data["cid"]
    out = Path(os.environ.get("CONSOLE_SCREENSHOTS") or tmp_path)

    def shot(page: Any, name: str, full_page: bool = True) -> None:
        page.screenshot(path=str(out / f"console-agentic-{name}.png"), full_page=full_page)

    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(str(error)))
    searches: list[dict[str, Any]] = []
    page.on(
        "request",
        lambda request: (
            searches.append({"url": request.url, **json.loads(request.post_data or "{}")})
            if request.url.endswith("/_search")
            else None
        ),
    )

    page.goto(server.url + "/_console")
    page.fill("#key", alice)
    page.press("#key", "Enter")
    page.get_by_role("tab", name="Agentic memory").click()

    # The containers alice can use: her own two, and dave's, shared with her role.
    page.wait_for_selector(f"tr[data-container-id='{data['shared']}']")
    access = page.locator("#container-table tbody tr").evaluate_all(
        "rows => Object.fromEntries(rows.map(r => [r.dataset.containerId, r.querySelector('.badge').textContent]))"
    )
    assert access == {cid: "own", data["bulk"]: "own", data["shared"]: "shared by dave"}
    assert page.locator("#whoami").inner_text() == "user alice · org-console · roles support"

    # A container: its configuration, then its long-term facts as the API lists them (newest change first).
    page.click(f"tr[data-container-id='{cid}'] button.open")
    page.wait_for_selector("#fact-table tbody tr")
    meta = page.locator("#container-meta").inner_text()
    assert "SEMANTIC · namespace user_id" in meta and "built-in · TEXT_EMBEDDING · 384 dimensions" in meta
    assert "sessions: 30 days" in meta and "long-term: at most 2" in meta and "chat" in meta
    expected = hits(
        server,
        alice,
        f"{CONTAINERS}/{cid}/memories/long-term/_search",
        {"query": {"match_all": {}}, "sort": [{"last_updated_time": "desc"}, {"_id": "asc"}], "size": 100},
    )
    rows = page.locator("#fact-table tbody tr").evaluate_all(
        "rows => rows.map(r => [r.dataset.factId, r.querySelector('button.open').textContent,"
        " r.cells[1].firstChild.textContent, r.cells[2].textContent, r.cells[3].textContent])"
    )
    assert rows == [[h["_id"], h["_source"]["memory"], "SEMANTIC", "user_id=bob", "—"] for h in expected]
    assert HOSTILE_FACT in [row[1] for row in rows]  # stored markup is text
    rows_text = [row[1] for row in rows]  # HAMBURG first (the newest change), then the two others
    assert page.locator("#fact-table script, #fact-table b").count() == 0
    assert page.locator("#facts-label").inner_text() == "1–3 of 3"

    # A fact's history (ADD, then the UPDATE with before and after) and the working memories it came from.
    page.click(f"tr[data-fact-id='{data['berlin']}'] button.open")
    page.wait_for_selector("#fact-history li.entry[data-action=UPDATE]")
    page.wait_for_selector("#fact-sources li.entry .working-body")
    assert page.locator("#fact-text").inner_text() == HAMBURG
    history = page.locator("#fact-history li.entry").evaluate_all(
        "items => items.map(li => [li.dataset.action, li.querySelector('.before')?.lastChild.textContent ?? null,"
        " li.querySelector('.after')?.lastChild.textContent ?? null])"
    )
    assert history == [["ADD", None, BERLIN], ["UPDATE", BERLIN, HAMBURG]]
    sources = page.locator("#fact-sources li.entry").evaluate_all(
        "items => items.map(li => [li.dataset.workingMemoryId, li.querySelector('.working-body').textContent])"
    )
    assert sources == [
        [data["working"]["I live in Berlin"], "user: I live in Berlin"],
        [data["working"]["We moved to Hamburg"], "user: We moved to Hamburg"],
    ]
    shot(page, "fact")

    # Semantic and hybrid search over long-term memory, namespace-filtered, scores as the API gives them.
    page.click(".subtab[data-pane=lt-search]")
    page.fill("#lt-q", "internet problems at night")
    page.select_option("#lt-mode", "hybrid")
    page.fill("#lt-bm25", "0.3")
    page.click("#lt-add-namespace")
    page.locator("#lt-namespace .ns-key").fill("user_id")
    page.locator("#lt-namespace .ns-value").fill("bob")
    page.click("#lt-search-form button[type=submit]")
    page.wait_for_selector("#lt-results li.result")
    body = {"query": "internet problems at night", "k": 10, "namespace": {"user_id": "bob"}}
    status, found = call(
        server,
        "POST",
        f"{CONTAINERS}/{cid}/memories/long-term/_hybrid_search",
        {**body, "bm25_weight": 0.3, "neural_weight": 0.7},
        token=alice,
    )
    assert status == 200 and found["hits"]["hits"], found
    shown = page.locator("#lt-results li.result").evaluate_all(
        "items => items.map(li => [li.dataset.factId, li.querySelector('.score').textContent,"
        " li.querySelector('.fact-text').textContent])"
    )
    assert shown == [[h["_id"], f"{h['_score']:.4f}", h["_source"]["memory"]] for h in found["hits"]["hits"]]
    assert shown[0][2] == "Bob's Fritzbox router drops the line every evening"
    assert page.locator("#lt-search-meta").inner_text().startswith(f"{len(shown)} hybrid results")
    shot(page, "search")
    page.select_option("#lt-mode", "semantic")
    page.click("#lt-search-form button[type=submit]")
    page.wait_for_selector("#lt-search-meta >> text=semantic results")
    status, found = call(server, "POST", f"{CONTAINERS}/{cid}/memories/long-term/_semantic_search", body, token=alice)
    shown = page.locator("#lt-results li.result").evaluate_all(
        "items => items.map(li => [li.dataset.factId, li.querySelector('.score').textContent])"
    )
    assert shown == [[h["_id"], f"{h['_score']:.4f}"] for h in found["hits"]["hits"]]
    page.locator("#lt-namespace .ns-value").fill("nobody")
    page.click("#lt-search-form button[type=submit]")
    page.wait_for_selector("#lt-search-meta >> text=0 semantic results")

    # Sessions and their working memory; delete one after confirming, then the cascade report.
    page.click(".subtab[data-pane=sessions]")
    page.wait_for_selector("tr[data-session-id='call-2']")
    assert page.locator("tr[data-session-id='call-2'] button.open").inner_text() == HOSTILE_SUMMARY
    assert page.locator("#session-table img").count() == 0
    page.click("tr[data-session-id='call-2'] button.open")
    hamburg = data["working"]["We moved to Hamburg"]
    page.wait_for_selector(f"#working li[data-working-memory-id='{hamburg}']")
    assert page.locator("#working li.entry").count() == 1
    page.click(f"#working li[data-working-memory-id='{hamburg}'] button.delete")
    page.wait_for_selector("#confirm-forget[open]")
    assert hamburg in page.locator("#confirm-forget-text").inner_text()
    shot(page, "confirm-forget", full_page=False)  # a modal's backdrop covers the viewport only
    page.click("#confirm-forget button[value=delete]")
    page.wait_for_selector("#forget-report:visible")
    report = page.locator("#forget-report .report-group").evaluate_all(
        "groups => groups.map(g => [g.querySelector('h5').textContent,"
        " [...g.querySelectorAll('li .mono')].map(s => s.textContent)])"
    )
    assert report[:4] == [
        ["deleted: 1 working memories", [hamburg]],
        ["deleted: 0 sessions", []],
        ["deleted: 0 long-term facts", []],
        ["kept: 1 long-term facts (other sources remain)", [data["berlin"]]],
    ]
    assert report[4][0] == "deleted: 1 history entries" and report[5] == ["redacted: 0 history entries", []]
    # a kept fact shows its text as it is now: rolled back to what the remaining source wrote
    page.wait_for_selector(f"#forget-report li[data-id='{data['berlin']}'] .kept-text")
    assert page.locator(".kept-text").inner_text() == f" — now: {BERLIN}"
    page.wait_for_selector("#working li.muted >> text=No working memory.")
    shot(page, "forget-report")
    # the API agrees: the working memory is gone, the fact rolled back to what the remaining source wrote
    assert call(server, "GET", f"{CONTAINERS}/{cid}/memories/working/{hamburg}", token=alice)[0] == 404
    status, fact = call(server, "GET", f"{CONTAINERS}/{cid}/memories/long-term/{data['berlin']}", token=alice)
    assert fact["memory"] == BERLIN

    # What retention would delete: the container's dry run (long-term keeps at most 2 of its 3 facts).
    page.click(".subtab[data-pane=retention]")
    page.click("#dry-run")
    page.wait_for_selector("#retention-table")
    status, dry = call(server, "POST", f"{CONTAINERS}/{cid}/_retention/_dry_run", token=alice)
    assert status == 200 and dry["total_would_delete"] == 1, dry
    assert page.locator("#retention-total").inner_text() == "1"
    counts = page.locator("#retention-table tbody tr").evaluate_all(
        "rows => Object.fromEntries(rows.map(r => [r.dataset.type, r.querySelector('.count').textContent]))"
    )
    assert counts == {kind: str(value["total"]) for kind, value in dry["would_delete"].items()}
    shot(page, "retention")

    # The facts view of the container, for the picture.
    page.click(".subtab[data-pane=facts]")
    page.click(f"tr[data-fact-id='{data['berlin']}'] button.open")
    page.wait_for_selector("#fact-sources li.entry")
    shot(page, "facts")

    # Deleting a session forgets its working memory and every fact inferred only from it.
    page.click(".subtab[data-pane=sessions]")
    page.click("tr[data-session-id='call-1'] button.delete")
    page.wait_for_selector("#confirm-forget[open]")
    assert page.locator("#confirm-forget-text").inner_text().startswith("Delete session Router trouble?")
    page.click("#confirm-forget button[value=delete]")
    page.wait_for_selector("#forget-report .report-group[data-what=sessions] li[data-id='call-1']")
    page.wait_for_selector("tr[data-session-id='call-1']", state="detached")
    headings = page.locator("#forget-report .report-group h5").all_inner_texts()
    assert headings[:4] == [
        "deleted: 3 working memories",
        "deleted: 1 sessions",
        "deleted: 3 long-term facts",
        "kept: 0 long-term facts (other sources remain)",
    ]
    gone = page.locator("#forget-report .report-group[data-what='long-term facts'] li").all_inner_texts()
    assert sorted(text.split(" — ", 1)[1] for text in gone) == sorted([*rows_text, BERLIN][1:])
    assert call(server, "GET", f"{CONTAINERS}/{cid}/memories/sessions/call-1", token=alice)[0] == 404
    assert hits(server, alice, f"{CONTAINERS}/{cid}/memories/long-term/_search", {"query": {"match_all": {}}}) == []

    # 45 facts page from the server, 20 at a time, with search_after cursors.
    searches.clear()
    page.click(f"tr[data-container-id='{data['bulk']}'] button.open")
    page.wait_for_selector("#container-name >> text=Bulk import")
    page.click(".subtab[data-pane=facts]")
    page.wait_for_selector("#facts-label >> text=1–20 of 45")
    assert page.locator("#fact-table tbody tr").count() == PAGE_SIZE
    page.click("#facts-next")
    page.wait_for_selector("#facts-label >> text=21–40 of 45")
    page.click("#facts-next")
    page.wait_for_selector("#facts-label >> text=41–45 of 45")
    assert page.locator("#fact-table tbody tr").count() == 5 and page.locator("#facts-next").is_disabled()
    page.click("#facts-prev")
    page.wait_for_selector("#facts-label >> text=21–40 of 45")
    fact_pages = [s for s in searches if "/memories/long-term/_search" in s["url"]]
    assert len(fact_pages) == 4 and all(s["size"] == PAGE_SIZE for s in fact_pages)
    assert [("search_after" in s) for s in fact_pages] == [False, True, True, True]
    shown_ids = page.locator("#fact-table tbody tr").evaluate_all("rows => rows.map(r => r.dataset.factId)")
    everything = hits(
        server,
        alice,
        f"{CONTAINERS}/{data['bulk']}/memories/long-term/_search",
        {"query": {"match_all": {}}, "sort": [{"last_updated_time": "desc"}, {"_id": "asc"}], "size": 100},
    )
    assert shown_ids == [h["_id"] for h in everything[20:40]]

    # A narrow screen: no sideways scrolling in the agentic views either.
    page.set_viewport_size({"width": 380, "height": 800})
    page.click(f"tr[data-fact-id='{shown_ids[0]}'] button.open")
    page.wait_for_selector("#fact-history li.entry")
    for pane in ("facts", "sessions", "lt-search", "retention"):
        page.click(f".subtab[data-pane={pane}]")
        wide = page.evaluate(
            "() => [...document.querySelectorAll('main *')].filter(e => e.getBoundingClientRect().right > innerWidth + 1)"
            ".map(e => `${e.tagName}#${e.id}.${e.className}`)"
        )
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1"), (pane, wide)

    assert page.evaluate("window.__pwned") is None
    assert problems == [], problems
    context.close()
