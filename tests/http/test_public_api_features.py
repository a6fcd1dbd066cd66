"""The public in-process API beyond 2.11: 2.12 memories and messages, agentic memory, models and predict.

Only top-level names of ``memory_plugin``, no socket of our own: the LLM is the scripted local server
(tests/support/agentic_llm.py) that agentic memory's connector, or a registered model, calls.
"""

from __future__ import annotations

import json

import pytest

from memory_plugin import (
    ConnectorAction,
    InvalidArgument,
    MemoryPlugin,
    MemoryStrategy,
    NotFound,
    Principal,
    ServiceError,
)
from tests.support.agentic_llm import ScriptedLLM

ALICE = Principal("org-1", "alice")
BOB = Principal("org-1", "bob")
CAROL = Principal("org-2", "carol")
LOOPBACK = r"^http://127\.0\.0\.1:.*$"
#: The test embedder double's dimension (tests/http/conftest.py).
DIMENSION = 64


@pytest.fixture
async def mp(settings, embedder, llm):
    configured = settings.replace(
        agentic={"llm": {"url": str(llm.server.make_url("/v1/chat/completions")), "api_key": "sk-test"}},
        ml={"trusted_endpoints_regex": (LOOPBACK,), "allow_private_addresses": True},
    )
    async with MemoryPlugin.open(configured, embedder=embedder) as plugin:
        yield plugin


def facts_by_word(llm: ScriptedLLM, facts: dict[str, list[str]]) -> None:
    """The LLM extracts, from a conversation that mentions a word, the facts scripted for that word."""

    def extract(kind: str, messages: list[dict[str, object]]) -> list[str]:
        said = json.dumps(messages)
        return [fact for word, scripted in facts.items() if word in said for fact in scripted]

    llm.facts = extract


async def test_memories_and_messages_of_the_212_api(mp):
    memories = mp.memories
    billing = await memories.create_memory(ALICE, "Billing", additional_info={"channel": "chat"})
    other = await memories.create_memory(ALICE, "Other")
    assert (await memories.get_memory(ALICE, billing.conversation_id)).additional_info == {"channel": "chat"}

    first = await memories.add_message(ALICE, billing.conversation_id, input="Charged twice?", response="Refunded")
    second = await memories.add_message(ALICE, billing.conversation_id, input="  ", response="Anything else?")
    assert second.input is None  # blank texts are absent, as 2.12 keeps them
    trace = await memories.add_message(
        ALICE,
        billing.conversation_id,
        input="lookup",
        origin="tool",
        parent_message_id=first.interaction_id,
        trace_number=1,
    )
    with pytest.raises(InvalidArgument) as empty:
        await memories.add_message(ALICE, billing.conversation_id, input=" ")
    assert "At least one of the following parameters must be non-empty" in empty.value.reason

    listed = await memories.list_messages(ALICE, billing.conversation_id)
    assert [m.interaction_id for m in listed.items] == [first.interaction_id, second.interaction_id]  # no traces
    traces = await memories.list_traces(ALICE, first.interaction_id)
    assert [t.interaction_id for t in traces.items] == [trace.interaction_id]
    updated = await memories.update_message(ALICE, first.interaction_id, response="Refunded on 3 May")
    assert updated.result == "updated" and updated.document.response == "Refunded on 3 May"
    assert (await memories.get_message(ALICE, first.interaction_id)).response == "Refunded on 3 May"

    renamed = await memories.update_memory(ALICE, billing.conversation_id, name="Billing (done)")
    assert renamed.result == "updated" and renamed.document.name == "Billing (done)"
    assert [m.conversation_id for m in (await memories.list_memories(ALICE)).items] == [
        billing.conversation_id,  # most recently updated first
        other.conversation_id,
    ]
    found = await memories.search_memories(ALICE, {"query": {"match": {"name": "billing"}}})
    assert [hit.id for hit in found.hits] == [billing.conversation_id] and found.total == 1
    messages = await memories.search_messages(
        ALICE, billing.conversation_id, {"query": {"match": {"response": "refunded"}}}
    )
    assert [hit.id for hit in messages.hits] == [first.interaction_id]
    with pytest.raises(InvalidArgument) as window:
        await memories.list_memories(ALICE, next_token=9990, max_results=20)
    assert window.value.status == 400

    for stranger in (BOB, CAROL):  # another user, another organisation: nothing of Alice's is there
        with pytest.raises(NotFound):
            await memories.get_memory(stranger, billing.conversation_id)
        with pytest.raises(NotFound):
            await memories.get_message(stranger, first.interaction_id)
        assert (await memories.search_memories(stranger, {"query": {"match_all": {}}})).hits == []
    await memories.delete_memory(ALICE, billing.conversation_id)
    with pytest.raises(NotFound):
        await memories.get_memory(ALICE, billing.conversation_id)


async def test_agentic_add_infer_search_and_forget(mp, llm):
    agentic = mp.agentic
    box = await agentic.create_container(
        ALICE,
        "support",
        description="the support bot's memory",
        embedding_model_id="built-in",
        embedding_model_type="TEXT_EMBEDDING",
        embedding_dimension=DIMENSION,
        llm_id="default",
        strategies=[MemoryStrategy("semantic", ["user_id"])],
    )
    container = await agentic.get_container(ALICE, box)
    assert (container.name, container.description, container.owner) == ("support", "the support bot's memory", "alice")
    [strategy] = container.configuration["strategies"]
    assert strategy["type"] == "SEMANTIC" and strategy["namespace"] == ["user_id"]

    facts_by_word(llm, {"Lisbon": ["Bob moved to Lisbon", "Bob keeps bees"], "bicycle": ["Bob drives a red bicycle"]})
    first = await agentic.add(ALICE, box, "I moved to Lisbon and keep bees", user_id="bob", infer=True)
    second = await agentic.add(
        ALICE,
        box,
        [{"role": "user", "content": "My bicycle is red"}, {"role": "assistant", "content": "Noted"}],
        user_id="bob",
        infer=True,
    )
    assert first.session_id and second.session_id and first.session_id != second.session_id
    await agentic.settled()

    found = await agentic.search(ALICE, box, "where did Bob move to Lisbon", user_id="bob", k=3)
    assert found[0].memory == "Bob moved to Lisbon" and found[0].namespace == {"user_id": "bob"}
    assert {f.memory for f in found} == {"Bob moved to Lisbon", "Bob keeps bees", "Bob drives a red bicycle"}
    assert await agentic.search(ALICE, box, "Lisbon", user_id="carla") == []
    hybrid = await agentic.hybrid_search(ALICE, box, "bicycle", user_id="bob", k=1, bm25_weight=0.7, neural_weight=0.3)
    assert [h.memory for h in hybrid] == ["Bob drives a red bicycle"]
    with pytest.raises(InvalidArgument) as weights:
        await agentic.hybrid_search(ALICE, box, "bees", bm25_weight=0.9, neural_weight=0.9)
    assert weights.value.reason == "bm25_weight and neural_weight must sum to 1.0"

    bees = next(f for f in found if f.memory == "Bob keeps bees")
    fact = await agentic.get(ALICE, box, "long-term", bees.id, sources=True)
    assert fact.memory == "Bob keeps bees" and [s["working_memory_id"] for s in fact.sources] == [
        first.working_memory_id
    ]
    working = await agentic.get(ALICE, box, "working", first.working_memory_id)
    assert working.source["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "I moved to Lisbon and keep bees"}]}
    ]
    edited = await agentic.update(ALICE, box, "long-term", bees.id, memory="Bob keeps two hives of bees")
    assert edited.result == "updated" and edited.version == 2
    assert (await agentic.get(ALICE, box, "long-term", bees.id)).memory == "Bob keeps two hives of bees"

    # Forgetting: the working memory goes, and so does every fact inferred only from it, with a report.
    deleted = await agentic.delete(ALICE, box, "working", first.working_memory_id)
    assert deleted.written.result == "deleted" and deleted.written.id == first.working_memory_id
    lisbon = next(f for f in found if f.memory == "Bob moved to Lisbon")
    assert deleted.forgotten.working == [first.working_memory_id]
    assert sorted(deleted.forgotten.long_term_deleted) == sorted([lisbon.id, bees.id])
    with pytest.raises(NotFound):
        await agentic.get(ALICE, box, "long-term", bees.id)
    await agentic.settled()
    assert [f.memory for f in await agentic.search(ALICE, box, "Lisbon bees bicycle", user_id="bob")] == [
        "Bob drives a red bicycle"
    ]
    # A session's delete forgets its working memories too.
    session = await agentic.delete(ALICE, box, "sessions", str(second.session_id))
    assert session.forgotten.sessions == [second.session_id]
    assert session.forgotten.working == [second.working_memory_id] and len(session.forgotten.long_term_deleted) == 1


async def test_agentic_containers_sessions_and_queries(mp):
    agentic = mp.agentic
    box = await agentic.create_container(ALICE, "notes", container_id="alice-notes")
    assert box == "alice-notes"
    renamed = await agentic.update_container(ALICE, box, name="notes (kept)", disable_history=True)
    assert renamed.result == "updated" and renamed.version == 2
    assert (await agentic.get_container(ALICE, box)).name == "notes (kept)"
    listed = await agentic.search_containers(ALICE, {"query": {"match": {"name": "kept"}}})
    assert [hit.id for hit in listed.hits] == [box]

    session = await agentic.create_session(ALICE, box, session_id="chat-1", summary="Router trouble")
    assert session.session_id == "chat-1" and session.created
    assert not (await agentic.create_session(ALICE, box, session_id="chat-1")).created
    added = await agentic.add(
        ALICE, box, "The router reboots hourly", session_id="chat-1", tags={"topic": "router"}, metadata={"k": "v"}
    )
    assert added.session_id == "chat-1"
    plain = await agentic.add(ALICE, box, payload_type="data", structured_data={"plan": "fibre"})
    assert plain.session_id is None
    found = await agentic.search_memories(ALICE, box, "working", {"query": {"term": {"tags.topic": "router"}}})
    assert [hit.id for hit in found.hits] == [added.working_memory_id]
    assert (await agentic.get(ALICE, box, "sessions", "chat-1")).memory == "Router trouble"
    with pytest.raises(InvalidArgument) as infer:
        await agentic.add(ALICE, box, "hello", infer=True)  # no LLM configured on this container
    assert infer.value.parameter == "infer"

    for stranger in (BOB, CAROL):  # Bob (same organisation, no role) and Carol (another) see nothing
        with pytest.raises(NotFound):
            await agentic.get_container(stranger, box)
        with pytest.raises(NotFound):
            await agentic.add(stranger, box, "sneaking in")
        assert (await agentic.search_containers(stranger, {"query": {"match_all": {}}})).hits == []

    by_query = await agentic.delete_by_query(ALICE, box, "working", {"match_all": {}})
    assert (by_query.total, by_query.deleted) == (2, 2)
    deleted = await agentic.delete_container(ALICE, box)
    assert deleted.result == "deleted"
    with pytest.raises(NotFound):
        await agentic.get_container(ALICE, box)


async def test_models_connectors_and_predict(mp, llm):
    models = mp.models
    url = str(llm.server.make_url("/v1/chat/completions"))
    connector_id = await models.create_connector(
        ALICE,
        "my LLM",
        parameters={"model": "gpt-4o-mini"},
        credential={"openAI_key": "sk-alice"},
        actions=[
            ConnectorAction(
                "PREDICT",
                "POST",
                url,
                headers={"Authorization": "Bearer ${credential.openAI_key}"},
                request_body='{ "model": "${parameters.model}", "messages": [{"role": "system", "content": '
                '"${parameters.system_prompt}"}, {"role": "user", "content": "${parameters.user_prompt}"}] }',
            )
        ],
    )
    shown = await models.get_connector(ALICE, connector_id)
    assert shown["name"] == "my LLM" and "credential" not in shown and shown["actions"][0]["url"] == url

    registered = await models.register(ALICE, "chat", connector_id=connector_id, deploy=True)
    model = await models.get(ALICE, registered.model_id)
    assert model["model_state"] == "DEPLOYED" and model["connector_id"] == connector_id
    llm.summary = "Greeting"
    [result] = await models.predict(
        ALICE, registered.model_id, parameters={"system_prompt": "title conversations", "user_prompt": "hi"}
    )
    assert result.output[0].data_as_map is not None
    assert result.output[0].data_as_map["choices"][0]["message"]["content"] == "Greeting"
    assert llm.api_keys[-1] == "Bearer sk-alice"

    # The registered model as a container's LLM: Alice's key pays for the inference.
    facts_by_word(llm, {"Miso": ["Alice's cat is called Miso"]})
    box = await mp.agentic.create_container(
        ALICE,
        "pets",
        embedding_model_id="built-in",
        embedding_model_type="TEXT_EMBEDDING",
        embedding_dimension=DIMENSION,
        llm_id=registered.model_id,
        strategies=[MemoryStrategy()],
    )
    await mp.agentic.add(ALICE, box, "I have a cat called Miso", user_id="alice", infer=True)
    await mp.agentic.settled()
    [cat] = await mp.agentic.search(ALICE, box, "cat Miso", user_id="alice")
    assert cat.memory == "Alice's cat is called Miso"

    assert [hit.id for hit in (await models.search_models(ALICE, {"query": {"match": {"name": "chat"}}})).hits] == [
        registered.model_id
    ]
    assert (await models.search_connectors(CAROL, {"query": {"match_all": {}}})).hits == []
    vectors = await models.embed(ALICE, ["a cat", "a dog"])
    assert len(vectors) == 2 and all(len(v) == DIMENSION for v in vectors)
    with pytest.raises(ServiceError) as hidden:
        await models.get(CAROL, registered.model_id)
    assert hidden.value.status == 404
    with pytest.raises(ServiceError) as in_use:
        await models.delete(ALICE, registered.model_id)
    assert in_use.value.status == 400
    await models.undeploy(ALICE, registered.model_id)
    assert (await models.delete(ALICE, registered.model_id)).result == "deleted"
    assert (await models.delete_connector(ALICE, connector_id)).result == "deleted"


async def test_a_container_shared_by_backend_role_within_its_organisation_only(mp):
    """The API acts as the principal it is given, roles included, as a key holding them does over HTTP."""
    agentic = mp.agentic
    box = await agentic.create_container(ALICE, "team notes", backend_roles=["support"])
    teammate = Principal("org-1", "bob", ("support",))
    added = await agentic.add(teammate, box, "Customer 42 prefers email")
    assert (await agentic.get(teammate, box, "working", added.working_memory_id)).source["owner_id"] == "bob"
    for outsider in (BOB, Principal("org-2", "carol", ("support",))):  # no role; the role, elsewhere
        with pytest.raises(NotFound):
            await agentic.add(outsider, box, "sneaking in")
        with pytest.raises(NotFound):
            await agentic.get(outsider, box, "working", added.working_memory_id)
    with pytest.raises(ServiceError) as not_owner:
        await agentic.delete_container(teammate, box)
    assert not_owner.value.status == 403


async def test_agentic_memory_switched_off_refuses_in_process_as_over_http(settings, embedder):
    async with MemoryPlugin.open(settings.replace(agentic={"enabled": False}), embedder=embedder) as plugin:
        for attempt in (
            plugin.agentic.create_container(ALICE, "notes"),
            plugin.agentic.add(ALICE, "x", "hello"),
            plugin.agentic.search(ALICE, "x", "hello"),
            plugin.agentic.delete(ALICE, "x", "working", "y"),
        ):
            with pytest.raises(ServiceError) as refused:
                await attempt
            assert refused.value.status == 403
            assert str(refused.value).startswith("The Agentic Memory APIs are not enabled.")
