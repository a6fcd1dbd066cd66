"""Every group of the public API as a typed caller writes it: ``test_typing`` runs ``mypy --strict`` on this
file, so a result type that turns into ``Any``, or a keyword that stops type-checking, fails there.  It is
never run (tests/http/test_public_api_features.py runs the same calls)."""

from __future__ import annotations

from memory_plugin import (
    Added,
    AgenticDocument,
    ConnectorAction,
    ConnectorView,
    Conversation,
    Deleted,
    DeletedByQuery,
    Inference,
    Interaction,
    MemoryContainer,
    MemoryPlugin,
    MemoryStrategy,
    ModelView,
    Page,
    Principal,
    Registered,
    ScoredMemory,
    SearchHits,
    SessionCreated,
    Updated,
    Written,
)


async def memories(mp: MemoryPlugin, me: Principal) -> None:
    memory: Conversation = await mp.memories.create_memory(me, "Billing", additional_info={"channel": "chat"})
    message: Interaction = await mp.memories.add_message(me, memory.conversation_id, input="Hi", response="Hello")
    page: Page[Interaction] = await mp.memories.list_messages(me, memory.conversation_id, max_results=5)
    traces: Page[Interaction] = await mp.memories.list_traces(me, message.interaction_id)
    changed: Updated[Interaction] = await mp.memories.update_message(me, message.interaction_id, response="Hey")
    renamed: Updated[Conversation] = await mp.memories.update_memory(me, memory.conversation_id, name="x")
    listed: Page[Conversation] = await mp.memories.list_memories(me)
    found: SearchHits = await mp.memories.search_memories(me, {"query": {"match_all": {}}})
    messages: SearchHits = await mp.memories.search_messages(me, memory.conversation_id, {"query": {"match_all": {}}})
    print(page.next_token, traces.items, changed.result, renamed.document.name, listed.items, found.total, messages)
    await mp.memories.delete_memory(me, memory.conversation_id)


async def agentic(mp: MemoryPlugin, me: Principal) -> None:
    box: str = await mp.agentic.create_container(
        me, "support", llm_id="default", strategies=[MemoryStrategy()], **mp.agentic.built_in_embedding()
    )
    container: MemoryContainer = await mp.agentic.get_container(me, box)
    updated: Written = await mp.agentic.update_container(me, box, name="renamed", disable_history=True)
    containers: SearchHits = await mp.agentic.search_containers(me, {"query": {"match_all": {}}})
    added: Added = await mp.agentic.add(me, box, "I live in Lisbon", user_id="alice", infer=True)
    session: SessionCreated = await mp.agentic.create_session(me, box, session_id="s-1", summary="hello")
    await mp.agentic.settled()
    found: list[ScoredMemory] = await mp.agentic.search(me, box, "where does she live", user_id="alice", k=3)
    hybrid: list[ScoredMemory] = await mp.agentic.hybrid_search(me, box, "Lisbon", bm25_weight=0.3, neural_weight=0.7)
    fact: AgenticDocument = await mp.agentic.get(me, box, "long-term", found[0].id, sources=True)
    edited: Written = await mp.agentic.update(me, box, "long-term", fact.id, memory="Alice lives in Porto")
    working: SearchHits = await mp.agentic.search_memories(me, box, "working", {"query": {"match_all": {}}})
    deleted: Deleted = await mp.agentic.delete(me, box, "working", added.working_memory_id)
    forgotten: list[str] = deleted.forgotten.long_term_deleted
    by_query: DeletedByQuery = await mp.agentic.delete_by_query(me, box, "sessions", {"match_all": {}})
    gone: Written = await mp.agentic.delete_container(me, box, delete_memories=["working"])
    print(container.configuration, updated.version, containers.hits, session.created, hybrid, fact.memory)
    print(edited.result, working.total, forgotten, by_query.deleted, gone.result)


async def models(mp: MemoryPlugin, me: Principal) -> None:
    action = ConnectorAction("PREDICT", "POST", "https://llm.example/v1/chat/completions", request_body="{}")
    connector_id: str = await mp.models.create_connector(me, "llm", actions=[action], credential={"key": "sk"})
    connector: ConnectorView = await mp.models.get_connector(me, connector_id)
    registered: Registered = await mp.models.register(me, "chat", connector_id=connector_id, deploy=True)
    model: ModelView = await mp.models.get(me, registered.model_id)
    results: list[Inference] = await mp.models.predict(me, registered.model_id, parameters={"user_prompt": "hi"})
    vectors: list[list[float]] = await mp.models.embed(me, ["a", "b"])
    listed: SearchHits = await mp.models.search_models(me, {"query": {"match_all": {}}})
    connectors: SearchHits = await mp.models.search_connectors(me, {"query": {"match_all": {}}})
    await mp.models.undeploy(me, registered.model_id)
    deleted: Written = await mp.models.delete(me, registered.model_id)
    print(connector.get("name"), model.get("model_state"), results, vectors, deleted.result, listed, connectors)
