"""Differential conformance: every scenario sent to the real ml-commons 2.19.1 node and to us.

The judge is a real OpenSearch 2.19.1 node with the real ml-commons plugin, built
from Maven Central.  Our server runs as a subprocess on a socket, once with memory
on SQLite and once with the home region on a real OpenSearch node.  Each scenario
starts from an empty memory on both sides: the judge's memory indices are deleted,
and we use a new principal.  Any difference that ``deviations.py`` does not explain
fails the test, with every difference listed.

The remote-model scenarios (``scenarios_ml.py``) have both sides' connectors call one
scripted OpenAI-compatible server on a loopback port, which both are told to trust;
each starts from empty ml config indices on the judge and a new server of ours.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack
from pathlib import Path

import aiohttp
import pytest

from memory_plugin.auth import KeyStore
from memory_plugin.dsl.analysis import analyze
from tests.conformance.deviations import unexplained
from tests.conformance.differ import Differ, Side
from tests.conformance.scenarios import OPENSEARCH_SCENARIOS, SCENARIOS
from tests.conformance.scenarios_ml import ML_SCENARIOS
from tests.support.live import LiveServer, unavailable
from tests.support.opensearch.ml import MEMORY_INDICES, ml_node
from tests.support.opensearch.nodes import suite_node_dir
from tests.support.polling import eventually
from tests.support.scripted_openai import ScriptedOpenAI, scripted_openai

# The OpenSearch half of the scenarios runs our server on the session's nodes (``our_config``).
pytestmark = [pytest.mark.opensearch, pytest.mark.usefixtures("opensearch_nodes")]

ANALYZER_ANSWERS = Path(__file__).parents[1] / "unit" / "data" / "standard_analyzer_answers.json"

#: ml-commons' config indices of remote models; deleting them gives the judge no connectors, models or tasks.
ML_INDICES = ".plugins-ml-connector,.plugins-ml-model,.plugins-ml-model-group,.plugins-ml-task"
#: Connectors may call the scripted LLM, on any loopback port: the judge's setting and ours.
TRUSTED_LOOPBACK = r"^http://127\.0\.0\.1:.*$"
JUDGE_ML_SETTINGS = {
    "persistent": {
        "plugins.ml_commons.trusted_connector_endpoints_regex": [TRUSTED_LOOPBACK],
        "plugins.ml_commons.connector.private_ip_enabled": True,
    }
}


@pytest.fixture(scope="module")  # stopped after the suite: the ml node must not weigh on later tests
def judge() -> Iterator[str]:
    from tests.support.opensearch.distribution import missing_prerequisites

    missing = missing_prerequisites()
    if missing:
        unavailable(f"the ml-commons node needs {missing}")
    with ml_node(suite_node_dir()) as node:
        yield node.url


# On the OpenSearch store a server per scenario: BM25 statistics are index-wide, so a scenario's
# scores must not count the documents earlier scenarios left, as the judge's reset ensures there.
def our_config(request: pytest.FixtureRequest, base: Path, *settings: str) -> Path | None:
    """Our TOML config: ``settings`` (its lines), and on the OpenSearch store its region; None if empty."""
    text = "".join(f"{line}\n" for line in settings)
    if request.param == "opensearch":
        node = request.getfixturevalue("opensearch_nodes")[0]
        text += f'[regions.USA]\nstore = "opensearch"\nhosts = ["{node.url}"]\nindex_prefix = "conf-{uuid.uuid4().hex[:8]}"\n'
    if not text:
        return None
    config = base / "memory-plugin.toml"
    config.write_text(text)
    return config


#: Our ML settings for the ML scenarios: the scripted LLM on loopback is trusted, as the judge trusts it.
TRUST_LOOPBACK = ("[ml]", f"trusted_endpoints_regex = ['{TRUSTED_LOOPBACK}']", "allow_private_addresses = true")


@pytest.fixture(scope="module")
def embedded_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, LiveServer]]:
    """One embedded server of each kind for the module (a server starts in seconds, and there are fifty scenarios):
    each scenario is a new organisation's, and the embedded store's statistics are each owner's own."""
    with ExitStack() as stack:
        servers = {}
        for kind, settings in (("memory", ()), ("ml", TRUST_LOOPBACK)):
            base = tmp_path_factory.mktemp(f"conformance-{kind}-sqlite")
            config = base / "memory-plugin.toml"
            config.write_text("".join(f"{line}\n" for line in settings))
            servers[kind] = stack.enter_context(LiveServer(base / "data", config=config if settings else None))
        yield servers


def our_server(request: pytest.FixtureRequest, kind: str, *settings: str) -> Iterator[LiveServer]:
    """The module's embedded server of ``kind``, or a new server on the OpenSearch store."""
    if request.param == "sqlite":
        yield request.getfixturevalue("embedded_servers")[kind]
        return
    base = request.getfixturevalue("tmp_path_factory").mktemp(f"conformance-{kind}-{request.param}")
    with LiveServer(base / "data", config=our_config(request, base, *settings)) as server:
        yield server


@pytest.fixture(params=["sqlite", "opensearch"])
def ours(request: pytest.FixtureRequest) -> Iterator[LiveServer]:
    yield from our_server(request, "memory")


@pytest.fixture(params=["sqlite", "opensearch"])
def ours_ml(request: pytest.FixtureRequest) -> Iterator[LiveServer]:
    """Our server, trusting the scripted LLM on loopback as the judge does."""
    yield from our_server(request, "ml", *TRUST_LOOPBACK)


@pytest.fixture(scope="module")
def scripted_llm() -> Iterator[ScriptedOpenAI]:
    """The OpenAI-compatible server both sides' connectors call, on a free loopback port."""
    with scripted_openai() as llm:
        yield llm


async def fresh_principal(session: aiohttp.ClientSession, server: LiveServer) -> dict[str, str]:
    """A new user of a new organisation: an empty memory, like the judge's after its reset."""
    _, token = KeyStore(server.data_dir / "keys.json").create(f"org-{uuid.uuid4().hex[:8]}", "user")
    headers = {"Authorization": f"Bearer {token}"}

    async def accepted() -> bool:  # the server re-reads the keys file every second
        async with session.get(f"{server.url}/_plugins/_ml/memory", headers=headers) as response:
            return response.status == 200

    await eventually(accepted, "the new key is accepted")
    return headers


@pytest.fixture
async def differ(judge: str, ours: LiveServer) -> AsyncIterator[Differ]:
    async with aiohttp.ClientSession() as session:
        async with session.delete(f"{judge}/{MEMORY_INDICES}?ignore_unavailable=true") as response:
            assert response.status == 200, await response.text()
        differ = Differ(session, Side(judge, {}), Side(ours.url, await fresh_principal(session, ours)))
        yield differ
        await differ.close()


async def reset_judge_ml(session: aiohttp.ClientSession, judge: str) -> None:
    """Trust the scripted LLM, undeploy what is still deployed (a model outlives its index in memory), drop the indices."""
    async with session.put(f"{judge}/_cluster/settings", json=JUDGE_ML_SETTINGS) as response:
        assert response.status == 200, await response.text()
    async with session.get(f"{judge}/_plugins/_ml/profile/models") as response:
        assert response.status == 200, await response.text()
        profile = await response.json()
    deployed = sorted({model for node in profile.get("nodes", {}).values() for model in node.get("models", {})})
    if deployed:
        async with session.post(f"{judge}/_plugins/_ml/models/_undeploy", json={"model_ids": deployed}) as response:
            assert response.status == 200, await response.text()
        # Its state writes land before the indices go, not after (they would re-create them).
        await eventually(lambda: undeployed(session, judge, deployed), f"the real node marks {deployed} undeployed")
    async with session.delete(f"{judge}/{ML_INDICES}?ignore_unavailable=true") as response:
        assert response.status == 200, await response.text()


async def undeployed(session: aiohttp.ClientSession, judge: str, model_ids: list[str]) -> bool:
    """The node holds none of ``model_ids`` and none of their documents (read in real time) says DEPLOYED."""
    async with session.get(f"{judge}/_plugins/_ml/profile/models") as response:
        assert response.status == 200, await response.text()
        nodes = (await response.json()).get("nodes", {}).values()
    if any(model in node.get("models", {}) for node in nodes for model in model_ids):
        return False
    for model in model_ids:
        async with session.get(f"{judge}/.plugins-ml-model/_doc/{model}") as response:
            if response.status == 200 and (await response.json())["_source"].get("model_state") == "DEPLOYED":
                return False
    return True


@pytest.fixture
async def ml_differ(judge: str, ours_ml: LiveServer, scripted_llm: ScriptedOpenAI) -> AsyncIterator[Differ]:
    async with aiohttp.ClientSession() as session:
        await reset_judge_ml(session, judge)
        scripted_llm.fail_with = None
        scripted_llm.take()  # what earlier scenarios' calls left is not this one's
        real, ours = Side(judge, {}), Side(ours_ml.url, await fresh_principal(session, ours_ml))
        differ = Differ(session, real, ours, observe=scripted_llm.take)
        yield differ
        await differ.close()


@pytest.mark.parametrize("scenario", list(SCENARIOS))
async def test_scenario_matches_the_real_node(differ: Differ, scenario: str) -> None:
    await SCENARIOS[scenario](differ)
    left = unexplained(differ.differences)
    assert not left, f"{len(left)} differences from the real ml-commons node:\n" + "\n".join(map(str, left))


@pytest.mark.parametrize("ours", ["opensearch"], indirect=True)
@pytest.mark.parametrize("scenario", list(OPENSEARCH_SCENARIOS))
async def test_search_scenario_matches_the_real_node(differ: Differ, scenario: str) -> None:
    await OPENSEARCH_SCENARIOS[scenario](differ)
    left = unexplained(differ.differences)
    assert not left, f"{len(left)} differences from the real ml-commons node:\n" + "\n".join(map(str, left))


@pytest.mark.parametrize("scenario", list(ML_SCENARIOS))
async def test_ml_scenario_matches_the_real_node(
    ml_differ: Differ, scripted_llm: ScriptedOpenAI, scenario: str
) -> None:
    await ML_SCENARIOS[scenario](ml_differ, scripted_llm)
    left = unexplained(ml_differ.differences)
    assert not left, f"{len(left)} differences from the real ml-commons node:\n" + "\n".join(map(str, left))


async def test_standard_analyzer_matches_the_real_nodes(judge: str) -> None:
    """Our analyzer against the judge's own ``_analyze``, on every hard string we keep (CJK, emoji, Thai, numbers)."""
    texts = [a[0] for a in json.loads(ANALYZER_ANSWERS.read_text("utf-8"))]
    texts += ["İİ ΣΑΣ", "a\u0301b\u0300", "x" * 600, "🏳️‍🌈 flag", "ผมรักคุณ and ພາສາ", "v1.2.3-beta+build.5"]
    wrong = []
    async with aiohttp.ClientSession() as session:
        for text in texts:
            body = {"analyzer": "standard", "text": text}
            async with session.post(f"{judge}/_analyze", json=body) as response:
                real = [t["token"] for t in (await response.json())["tokens"]]
            if analyze(text) != real:
                wrong.append((text, real, analyze(text)))
    assert not wrong, wrong
