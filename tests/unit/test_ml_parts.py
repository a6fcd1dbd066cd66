"""The ml pieces on their own: the SQLite store's rules, sealed credentials, connector templates."""

from __future__ import annotations

import asyncio
import json
import os

import pytest

from memory_plugin.auth import Principal
from memory_plugin.errors import InvalidArgument
from memory_plugin.ml.budget import SWEEP_ABOVE, CallBudget, Throttled
from memory_plugin.ml.connector_requests import Action
from memory_plugin.ml.connectors import fill, java_uri_error, masked, prepare
from memory_plugin.ml.remote import literal_private_host, private
from memory_plugin.ml.secrets import SecretBox, new_master_key
from memory_plugin.ml.stores.base import StoreConflict
from memory_plugin.ml.stores.sqlite import MASTER_KEY_FILE, SqliteMLStore


async def test_sqlite_store_creates_once_replaces_at_a_version_and_keeps_owners_apart(tmp_path):
    store = SqliteMLStore(tmp_path / "ml.sqlite3")
    await store.open()
    try:
        owner, stranger = Principal("org", "u"), Principal("org", "v")
        await store.create("connector", owner, "c1", {"n": 0})
        with pytest.raises(StoreConflict):
            await store.create("connector", stranger, "c1", {"n": 1})
        read = await store.get("connector", owner, "c1")
        assert read is not None and await store.get("connector", stranger, "c1") is None
        wins = await asyncio.gather(*(store.replace("connector", owner, read, {"n": i}) for i in (1, 2)))
        assert sorted(wins) == [False, True]
        assert not await store.delete("connector", stranger, "c1")
        assert await store.erase(owner) == 1 and await store.all("connector", owner) == []
        key = await store.master_key(b"k" * 32)
        assert key == b"k" * 32 and await store.master_key(b"other" * 8) == key
        assert os.stat(tmp_path / MASTER_KEY_FILE).st_mode & 0o777 == 0o600
    finally:
        await store.close()


def test_a_sealed_credential_opens_only_in_its_own_context_and_under_its_key():
    box = SecretBox(new_master_key())
    sealed = box.seal("sk-secret", "org\x00alice\x00c1")
    assert "sk-secret" not in sealed and sealed != box.seal("sk-secret", "org\x00alice\x00c1")  # fresh nonce
    assert box.open(sealed, "org\x00alice\x00c1") == "sk-secret"
    with pytest.raises(ValueError):
        box.open(sealed, "org\x00bob\x00c1")  # copied into another owner's connector
    with pytest.raises(ValueError):
        SecretBox(new_master_key()).open(sealed, "org\x00alice\x00c1")


def test_templates_fill_what_they_can_and_mask_credentials_in_messages():
    parameters = {"model": "m", "x": "1"}
    assert fill("${parameters.model}/${parameters.none:-d}/${parameters.gone}", parameters) == "m/d/${parameters.gone}"
    assert fill("${credential.k}", {}, {"k": "s"}) == "s"
    assert masked('{"k": "${credential.k}", "m": "${parameters.model}"}', parameters) == '{"k": "*****", "m": "m"}'
    action = Action(
        "PREDICT", "post", "http://h/${parameters.model}", {"A": "${credential.k}"}, '{"v": ${parameters.x}}'
    )
    request = prepare(action, parameters, None, {"k": "s"}, None)
    assert (request.method, request.url, request.headers, request.body) == (
        "POST",
        "http://h/m",
        {"A": "s"},
        '{"v": 1}',
    )
    nullable = Action("PREDICT", "POST", "http://h", None, '{"stop": "${parameters.stop:-null}"}')
    assert prepare(nullable, {}, None, {}, None).body == '{"stop": null}'
    with pytest.raises(InvalidArgument, match=r"Invalid payload: \{\"v\": \$\{parameters.y\}\}"):
        prepare(Action("PREDICT", "POST", "http://h", None, '{"v": ${parameters.y}}'), {}, None, {}, None)
    with pytest.raises(InvalidArgument, match="Some parameter placeholder not filled in payload: y, z"):
        prepare(
            Action("PREDICT", "POST", "http://h", None, '{"v": "${parameters.y}${parameters.z}"}'), {}, None, {}, None
        )
    # a call's text parameter is escaped into the template's string; headers see the connector's parameters only
    quoting = Action("PREDICT", "POST", "http://h", {"X": "${parameters.m}"}, '{"q": "${parameters.m}"}')
    request = prepare(quoting, {"m": "own"}, {"m": 'say "hi"'}, {}, None)
    assert json.loads(request.body or "") == {"q": 'say "hi"'} and request.headers == {"X": "own"}


#: ``java.net.URI.create``'s messages for these URLs, as recorded from a JDK 17.
JAVA_URI_ERRORS = [
    ("http://127.0.0.1:9/v1/${parameters.x}/y", "Illegal character in path at index 23"),
    ("http://h/p?a=${parameters.q}", "Illegal character in query at index 14"),
    ("http://h/p?a=${parameters.q}#${parameters.f}", "Illegal character in query at index 14"),
    ("http://h/p?a=[${parameters.x}]", "Illegal character in query at index 15"),
    ("http://h/p?q=a b&r=${parameters.x}", "Illegal character in query at index 14"),
    ("http://h/p#${parameters.f}", "Illegal character in fragment at index 12"),
    ("http://h/#a#${parameters.x}", "Illegal character in fragment at index 11"),
    ("https://${parameters.endpoint}/v1", "Illegal character in authority at index 8"),
    ("http://u:p@h:${parameters.port}/x", "Illegal character in authority at index 7"),
    ("http://[::1]:${parameters.p}/x", "Illegal character in authority at index 7"),
    ("${parameters.endpoint}", "Illegal character in path at index 1"),
    ("${parameters.s}://h/", "Illegal character in scheme name at index 0"),
    ("h t://x/${parameters.x}", "Illegal character in scheme name at index 1"),
    ("HTTP://h/${parameters.x}", "Illegal character in path at index 10"),
    ("http:${parameters.x}", "Illegal character in opaque part at index 6"),
    ("http://h/\u00e9\U0001f918/${parameters.x}", "Illegal character in path at index 14"),  # UTF-16 units
    ("http://h/\u0085${parameters.x}", "Illegal character in path at index 9"),
    ("http://h/\u00a0${parameters.x}", "Illegal character in path at index 9"),
    ("http://h/\u0080x${parameters.x}", "Illegal character in path at index 9"),
    ("http://h/a%zz/${parameters.x}", "Malformed escape pair at index 10"),
    ("http://h/p%4", "Malformed escape pair at index 10"),
    ("http://h/a b", "Illegal character in path at index 10"),
]


@pytest.mark.parametrize(("url", "reason"), JAVA_URI_ERRORS)
def test_a_url_java_refuses_gets_javas_message(url, reason):
    assert java_uri_error(url) == f"{reason}: {url}"


@pytest.mark.parametrize("url", ["http://h/ok", "https://h:443/a/b?c=d&e=[f]#g", "http://h/%41\u00e9", "urn:x"])
def test_a_url_java_takes_has_no_error(url):
    assert java_uri_error(url) is None


def test_a_connector_url_with_a_placeholder_left_unfilled_is_refused_with_credentials_masked():
    action = Action("PREDICT", "POST", "http://h/${credential.k}/${parameters.model}/${parameters.gone}", None, None)
    with pytest.raises(InvalidArgument) as refused:
        prepare(action, {"model": "m"}, None, {"k": "secret"}, None)
    reason = "Illegal character in path at index 18: http://h/*****/m/${parameters.gone}"
    assert refused.value.opensearch_body()["error"] == {
        "root_cause": [{"type": "illegal_argument_exception", "reason": reason}],
        "type": "illegal_argument_exception",
        "reason": reason,
        "caused_by": {"type": "u_r_i_syntax_exception", "reason": reason},
    }
    filled = prepare(action, {"model": "m"}, {"gone": "g"}, {"k": "secret"}, None)
    assert filled.url == "http://h/secret/m/g"
    # a call's parameter is JSON-escaped, so its "/" is "\/", which Java refuses too (checked on the real node)
    with pytest.raises(InvalidArgument, match=r"^Illegal character in path at index 18: http://h/\*{5}/m/a\\/b$"):
        prepare(action, {"model": "m"}, {"gone": "a/b"}, {"k": "secret"}, None)
    # a URL only its credential breaks is refused without showing it
    with pytest.raises(InvalidArgument, match=r"^the connector's URL is not a valid URL: http://h/\*{5}/m/g$"):
        prepare(action, {"model": "m", "gone": "g"}, None, {"k": "se cret"}, None)


@pytest.mark.parametrize(
    "address, refused",
    [
        ("127.0.0.1", True),
        ("10.1.2.3", True),
        ("169.254.169.254", True),  # cloud metadata
        ("::1", True),
        ("::ffff:127.0.0.1", True),
        ("fd00::1", True),
        ("0.0.0.0", True),
        ("8.8.8.8", False),
        ("2606:4700:4700::1111", False),
    ],
)
def test_private_addresses(address, refused):
    assert private(address) is refused


def test_literal_private_hosts_in_urls():
    assert literal_private_host("http://127.0.0.1:9/x") and literal_private_host("http://[::1]:9/x")
    assert not literal_private_host("https://api.openai.com/v1") and not literal_private_host("not a url")


async def test_the_call_budget_slides_with_the_minute_and_forgets_idle_organisations():
    now = [0.0]
    budget = CallBudget(per_minute=2, concurrent=0, clock=lambda: now[0])
    for _ in range(2):
        async with budget.spend("org"):
            pass
    with pytest.raises(Throttled):
        async with budget.spend("org"):
            pass
    async with budget.spend("other"):  # organisations are apart
        pass
    now[0] = 59.9
    with pytest.raises(Throttled):
        async with budget.spend("org"):
            pass
    now[0] = 60.0  # the first two calls left the window
    async with budget.spend("org"):
        pass
    for n in range(SWEEP_ABOVE + 1):
        async with budget.spend(f"many-{n}"):
            pass
    now[0] = 200.0
    async with budget.spend("late"):
        pass
    assert set(budget._recent) == {"late"}


def test_trusted_endpoint_patterns_are_checked_when_settings_load():
    from memory_plugin.settings import load_settings

    settings = load_settings(environ={"MEMORY_PLUGIN_ML_TRUSTED_ENDPOINTS_REGEX": r'["^https://a\\.example/.*$"]'})
    assert settings.ml.trusted_endpoints_regex == (r"^https://a\.example/.*$",)
    # a backreference would need a backtracking engine, whose time a long URL could make unbounded
    with pytest.raises(ValueError, match="not a regex RE2 runs"):
        load_settings(environ={"MEMORY_PLUGIN_ML_TRUSTED_ENDPOINTS_REGEX": r'["^(a+)\\1$"]'})


def test_a_stored_null_is_shown_as_no_field_as_ml_commons_writes_none():
    from memory_plugin.ml.views import connector_view, model_search_view, model_view

    stored = {"name": "m", "description": None, "model_state": "REGISTERED", "connector": {"description": None}}
    assert (
        model_view(stored) == model_search_view(stored) == {"name": "m", "model_state": "REGISTERED", "connector": {}}
    )
    assert connector_view({"name": "c", "description": None, "client_config": None}) == {"name": "c"}
