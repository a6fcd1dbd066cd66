"""Fixtures shared by every tier (tests/http/conftest.py swaps in the embedder double)."""

from __future__ import annotations

import asyncio
import base64
import gc
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from embedder import Embedder, ensure_default_model
from memory_plugin.app import create_app
from memory_plugin.auth import KeyStore
from memory_plugin.ml.stores.sqlite import MASTER_KEY_FILE
from memory_plugin.services import LOCK_FILE, open_services
from memory_plugin.settings import OpenSearchRegion, Settings, load_settings
from tests.support.fake_embedder import FakeEmbedder
from tests.support.polling import PATIENCE


def pytest_addoption(parser: pytest.Parser) -> None:
    # `make check` fuzzes each operation shallowly for fast feedback; the full suite (`make test`) at full depth.
    parser.addoption(
        "--fuzz-examples",
        type=int,
        default=25,
        help="examples per operation and mode in tests/http/test_openapi.py's fuzz (default 25)",
    )


#: The folders of the in-process tiers (`make check`): unit tests and in-process HTTP tests.
IN_PROCESS_FOLDERS = ("unit", "http")


#: The xdist group of the in-process tests that need the real model: one worker loads it, the others never do.
REAL_MODEL = "real-model"
#: The xdist group of the tests that need real OpenSearch nodes: one worker starts them, once.
OPENSEARCH_NODES = "opensearch-nodes"


def _worker_group(item: pytest.Item) -> str | None:
    uses = getattr(item, "fixturenames", ())
    # the session's nodes: asked for, or through an OpenSearch ``backend`` (a test starting a node of its own is free)
    if "opensearch_nodes" in uses or ("backend" in uses and item.get_closest_marker("opensearch") is not None):
        return OPENSEARCH_NODES
    if item.get_closest_marker("inprocess") is not None and item.get_closest_marker("model") is not None:
        return REAL_MODEL
    return None


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> Iterator[None]:
    """Marks ``inprocess`` the tests of the in-process folders that need no OpenSearch node (`make test` runs them
    first, then everything else: real nodes, real processes), and places tests on xdist's workers (``--dist
    loadgroup``): those that need the real nodes on one worker, which starts them once, and the in-process ones
    that need the real model on one, which loads it once.

    xdist (3.8) passes a test's group to the scheduler as a suffix of its id, ``...@group``, which it writes to
    ``_nodeid``; pytest 9.2's ids are structured and no longer read that attribute, so the groups were silently
    lost (pytest-xdist#1386).  After xdist's hook the suffix goes where pytest reads it, for every group."""
    root = Path(__file__).parent
    for item in items:
        folder = item.path.relative_to(root).parts[0] if item.path.is_relative_to(root) else ""
        if folder in IN_PROCESS_FOLDERS and item.get_closest_marker("opensearch") is None:
            item.add_marker(pytest.mark.inprocess)
        group = _worker_group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    yield
    if getattr(config.option, "loadgroup", False):  # set on xdist's workers only
        for item in items:
            mark = item.get_closest_marker("xdist_group")
            if mark is not None and not item.nodeid.endswith(f"@{mark.args[0]}"):
                item._id = type(item._id).parse(f"{item.nodeid}@{mark.args[0]}")  # type: ignore[attr-defined]


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection loaded (the test modules and their libraries, about 100,000 objects) stays for the run:
    frozen, the collector no longer walks it, and a full collection waits for 100 middle ones, not 10.  Over
    126 in-process tests the collector took 1.5-1.8 s of their 20 s of CPU, 0.6 s after.  The cycles tests
    leave are still collected."""
    gc.collect()
    gc.freeze()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, 100)


@dataclass(frozen=True)
class Caller:
    key_id: str
    token: str
    organization_id: str
    user_id: str | None

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    @property
    def basic_headers(self) -> dict[str, str]:
        key_id, secret = self.token.split(".", 1)
        return {"Authorization": "Basic " + base64.b64encode(f"{key_id}:{secret}".encode()).decode()}


def make_caller(keys: KeyStore, organization_id: str, user_id: str | None) -> Caller:
    entry, token = keys.create(organization_id, user_id)
    return Caller(entry.key_id, token, organization_id, user_id)


@pytest.fixture(scope="session")
def real_embedder() -> Embedder:
    """The real default model, loaded once for the whole run."""
    return Embedder.from_dir(ensure_default_model())


@pytest.fixture
def embedder(real_embedder: Embedder) -> Embedder:
    return real_embedder


# -- backend parity: one suite, run on each store backend ------------------------------------------------

#: The backends a store contract runs on.  The OpenSearch one needs real nodes (and, as the suites there
#: always did, the real model), so ``make check`` (``-m 'not opensearch'``) runs only the embedded one.
BACKENDS = {
    "embedded": (),
    "opensearch": (pytest.mark.opensearch, pytest.mark.model),
}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test marked ``backends("embedded", "opensearch")`` (a module's ``pytestmark``, usually) that takes
    ``backend``, directly or through ``settings``, runs once per backend named, its id ending in the backend."""
    marker = metafunc.definition.get_closest_marker("backends")
    if marker is None or "backend" not in metafunc.fixturenames:
        return
    params = [pytest.param(name, id=name, marks=BACKENDS[name]) for name in marker.args]
    metafunc.parametrize("backend", params, indirect=True)


@pytest.fixture(scope="session")
def backend(request: pytest.FixtureRequest) -> str:
    """Where the home region's stores live: ``embedded`` (SQLite and faiss) unless a ``backends`` mark says.

    Session-scoped so that the tests of one backend run together: the OpenSearch nodes start once, and a
    module's live server (``tests/http/test_memory_v212.py``) may depend on it."""
    return str(getattr(request, "param", "embedded"))


@pytest.fixture
def index_prefix(opensearch_nodes) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """The home region's index prefix on OpenSearch, the test's own; its indices are deleted afterwards."""
    prefix = f"mp-t-{uuid.uuid4().hex[:12]}"
    yield prefix
    opensearch_nodes[0].request("DELETE", f"/{prefix}-*")


def on_opensearch(settings: Settings, url: str, prefix: str) -> Settings:
    """``settings`` with the home region on the OpenSearch node at ``url``."""
    region = OpenSearchRegion(hosts=(url,), index_prefix=prefix, timeout=PATIENCE)
    return settings.replace(regions={"USA": region}, home_region="USA")


def settings_for(data_dir: Path) -> Settings:
    # A region that answers late is a failed region: on a loaded machine 2 s (the default) is not enough.
    return load_settings(
        environ={}, data_dir=data_dir, http={"port": 0}, bridge={"enabled": False}, search_deadline=PATIENCE
    )


@pytest.fixture(scope="session")
def empty_stores(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data folder whose embedded stores are made and empty, for each test to copy: making the seven SQLite
    files and their schemas was about a third of each app's start-up.  Without the folder's lock, keys and
    master key, which each test's app makes its own."""
    data_dir = tmp_path_factory.mktemp("empty-stores") / "data"

    async def make() -> None:
        async with open_services(settings_for(data_dir), embedder=FakeEmbedder.with_default_tokenizer()):
            pass

    asyncio.run(make())
    for name in (LOCK_FILE, MASTER_KEY_FILE):
        (data_dir / name).unlink()
    return data_dir


@pytest.fixture
def settings(tmp_path: Path, backend: str, request: pytest.FixtureRequest) -> Settings:
    """The test's settings, its data folder empty stores (``fresh_data_dir``: nothing at all)."""
    settings = settings_for(tmp_path / "data")
    if backend == "embedded" and request.node.get_closest_marker("fresh_data_dir") is None:
        shutil.copytree(request.getfixturevalue("empty_stores"), settings.data_dir)
    if backend == "opensearch":
        nodes = request.getfixturevalue("opensearch_nodes")
        settings = on_opensearch(settings, nodes[0].url, request.getfixturevalue("index_prefix"))
    return settings


@pytest.fixture
def keys(settings: Settings) -> KeyStore:
    return KeyStore(settings.resolved_keys_file)


@pytest.fixture
def alice(keys: KeyStore) -> Caller:
    return make_caller(keys, "org-1", "alice")


@pytest.fixture
def bob(keys: KeyStore) -> Caller:
    return make_caller(keys, "org-1", "bob")


@pytest.fixture
def carol(keys: KeyStore) -> Caller:
    return make_caller(keys, "org-2", "carol")


@pytest.fixture
def admin(keys: KeyStore) -> Caller:
    """An organisation-wide key of org-1 (no user): sees every user's records."""
    return make_caller(keys, "org-1", None)


@pytest.fixture
def other_admin(keys: KeyStore) -> Caller:
    return make_caller(keys, "org-2", None)


@pytest.fixture
async def client(
    aiohttp_client,
    settings: Settings,
    embedder: Embedder,
    alice: Caller,
    bob: Caller,
    carol: Caller,
    admin: Caller,
    other_admin: Caller,
):  # type: ignore[no-untyped-def]
    return await aiohttp_client(create_app(settings, embedder=embedder))


@pytest.fixture(scope="session")
def opensearch_nodes():  # type: ignore[no-untyped-def]
    """Two real single-node OpenSearch 2.19.1 clusters ("regions"), for the whole run.

    They may be skipped on a developer machine without Java or Maven; under
    ``CI=true`` that is a failure, never a skip.
    """
    from tests.support.live import unavailable
    from tests.support.opensearch import missing_prerequisites, start_nodes, suite_node_dir

    missing = missing_prerequisites()
    if missing:
        unavailable(f"OpenSearch tests need {missing}")
    with start_nodes(2, base_dir=suite_node_dir()) as nodes:
        yield nodes


# -- agentic memory: a scripted chat-completions server and an app whose LLM connector points at it ----


@pytest.fixture
async def llm(aiohttp_server):  # type: ignore[no-untyped-def]
    """A local OpenAI-compatible chat-completions server with scripted answers (tests/support/agentic_llm.py)."""
    from tests.support.agentic_llm import ScriptedLLM

    scripted = ScriptedLLM()
    scripted.server = await aiohttp_server(scripted.app())  # type: ignore[attr-defined]
    return scripted


@pytest.fixture
async def embeddings(aiohttp_server):  # type: ignore[no-untyped-def]
    """A local OpenAI-compatible embeddings server, deterministic (tests/support/scripted_openai.py)."""
    from tests.support.scripted_openai import ScriptedOpenAI

    server = ScriptedOpenAI()
    server.url = str((await aiohttp_server(server.app())).make_url("")).rstrip("/")
    return server


@pytest.fixture
async def api(aiohttp_client, settings, embedder, llm, alice, bob, carol, admin):  # type: ignore[no-untyped-def]
    """The app, with agentic memory's LLM connector pointed at ``llm``."""
    settings = settings.replace(
        agentic={"llm": {"url": str(llm.server.make_url("/v1/chat/completions")), "api_key": "sk-test"}}
    )
    return await aiohttp_client(create_app(settings, embedder=embedder))
