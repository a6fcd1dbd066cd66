"""The infer worker: runs queued inferring adds (extract facts, find similar memories, decide, apply), as
ml-commons' strategies do (AGENTIC.md 6), and applies each run in one write with its history, dropping its job
in the same write: a SIGKILL never leaves half of a run applied.

Where several server processes share the job queue (OpenSearch), a job is claimed with a lease and the lease
renewed before every model call; a process that finds its lease taken over drops the run (the job is the new
holder's).  The ids a run writes (long-term ADDs, history entries) are derived from the job and their position
in the run, so a run applied twice (its first holder stalled past its lease) writes the same documents.
Each LLM answer is kept with the job as soon as it arrives (``keep_infer_answers``): a run that fails after a
call (a store error, retried) reuses the answer, so an add's extraction and decision are asked once each.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from memory_plugin.agentic import prompts
from memory_plugin.agentic.infer_run import InferRun, job_source
from memory_plugin.agentic.llm import (
    DEFAULT_RESULT_PATH,
    NO_LLM,
    STORE_FAILURES,
    ChatModel,
    ContainerModels,
    LLMError,
    TextEmbedding,
    first_json_object,
    read_path,
)
from memory_plugin.agentic.metrics import AgenticMetrics
from memory_plugin.agentic.models import (
    WORKING,
    EmbeddingChoice,
    LongTermMemory,
    Strategy,
    flat_object_terms,
    now_millis,
    valid_unicode,
)
from memory_plugin.agentic.stores.base import InferJob, LongTermChange, LongTermScope, owner_id
from memory_plugin.agentic.stores.containers import ContainerStore
from memory_plugin.agentic.stores.forgetting import ForgettingStore
from memory_plugin.agentic.stores.memories import MemoryDocStore
from memory_plugin.agentic.stores.queues import InferQueue
from memory_plugin.agentic.stores.ranking import LongTermRanking
from memory_plugin.agentic.stores.sources import SOURCES
from memory_plugin.agentic.views import cosine_score
from memory_plugin.agentic.workers import POLL_SECONDS, EmbeddingWorker
from memory_plugin.background import Worker
from memory_plugin.clock import derived_id
from memory_plugin.errors import ServiceError, UpstreamFailed
from memory_plugin.leases import LeaseLost

log = logging.getLogger("memory_plugin.agentic")

INFER_BATCH = 8
#: An infer job that keeps failing for reasons other than the LLM (a bug) is dropped after this many tries.
MAX_INFER_ATTEMPTS = 5


class InferWorker(Worker):
    def __init__(
        self,
        jobs: InferQueue,
        models: ContainerModels,
        embeddings: EmbeddingWorker,
        metrics: AgenticMetrics,
        *,
        containers: ContainerStore,
        memory_docs: MemoryDocStore,
        ranking: LongTermRanking,
        forgetter: ForgettingStore,
    ) -> None:
        """A run reads its container (``containers``) and its working memory (``memory_docs``), ranks the
        memories similar to each fact (``ranking``), and forgets what it wrote if its source went meanwhile."""
        super().__init__("agentic-infer", POLL_SECONDS if jobs.shared else None)
        self.jobs = jobs
        self.containers = containers
        self.memory_docs = memory_docs
        self.ranking = ranking
        self.forgetter = forgetter
        self.models = models
        self.embeddings = embeddings
        self.metrics = metrics
        #: Deleting a working memory forgets what was inferred from it (``forgetting``); off: ml-commons' way.
        self.forgetting = True

    async def drain(self) -> None:
        # A shared queue is claimed a job at a time, so that no claimed job waits out its lease behind others.
        limit = 1 if self.jobs.shared else INFER_BATCH
        while True:
            jobs = await self.jobs.claim_infer_jobs(limit)
            if not jobs:
                return
            for job in jobs:
                try:
                    await self.run(job)
                except LeaseLost:
                    log.info("infer job %s was taken over by another process; leaving it to them", job.job_id)

    async def _forget_if_source_gone(self, job: InferJob) -> None:
        """After applying: if the run's working memory was deleted meanwhile (on OpenSearch a cascade can run
        between this run's lease check and its bulk), forget it again, which removes what this run wrote.
        Checked after the refreshed bulk, and a cascade deletes the working memory before it looks for what
        cites it: so either that cascade sees this run's writes, or this check sees the source gone."""
        source = job_source(job)
        if source is None:
            return
        working_id = source["working_memory_id"]
        if await self.memory_docs.get(job.owner, job.container_id, WORKING, working_id) is None:
            log.info("infer job %s: its working memory %s was deleted meanwhile; forgetting", job.job_id, working_id)
            await self.forgetter.forget(job.owner, job.container_id, [working_id])

    async def _hold(self, job: InferJob) -> None:
        """Before a slow step: extend this process's lease on the job, or stop if it was taken over."""
        if not await self.jobs.renew_infer_job(job):
            raise LeaseLost(job.job_id)

    async def run(self, job: InferJob) -> None:
        """Run a job's strategies and apply their changes with their history, dropping the job, in one write."""
        started = time.perf_counter()
        next_id = job_ids(job)
        stored = await self.containers.find_container(job.owner.organization_id, job.container_id)
        if stored is None:
            await self.jobs.apply_infer(job, [], [])
            return
        run = InferRun.of(job, stored, self.models)
        changes: list[LongTermChange] = []
        history: list[tuple[str, dict[str, Any]]] = []
        outcome = "applied"
        try:
            for strategy in run.container.strategies:
                scope = strategy.scope(run.namespace)
                if scope is None:
                    continue
                try:
                    strategy_changes = await self._run_strategy(run, strategy, scope, next_id)
                except (LLMError, UpstreamFailed) as error:  # the LLM or the embedding model failed
                    outcome = "error"
                    history.append((next_id(), _error_record(run, scope, str(error))))
                    continue
                changes += strategy_changes
                history += [(next_id(), _history_record(run, change, scope)) for change in strategy_changes]
        except LeaseLost:
            raise
        except Exception as error:  # a bug or a store failure: retried, then recorded
            if job.attempts + 1 < MAX_INFER_ATTEMPTS:
                await self.jobs.count_infer_attempt(job)
                raise
            log.exception("infer job %s failed %d times; recording the error", job.job_id, MAX_INFER_ATTEMPTS)
            changes, history, outcome = (
                [],
                [(next_id(), _error_record(run, {}, f"internal error: {error}"))],
                "error",
            )
        if run.container.config.get("disable_history", False):
            history = []
        await self.jobs.apply_infer(job, changes, history)
        if self.forgetting and (changes or history):
            await self._forget_if_source_gone(job)
        self.metrics.infer_runs.labels(outcome).inc()
        self.metrics.infer_seconds.observe(time.perf_counter() - started)
        for change in changes:
            self.metrics.long_term_changes.labels(change.event).inc()
        if changes:
            self.embeddings.wake()

    async def _fact_vector(self, embedding: TextEmbedding, choice: EmbeddingChoice, fact: str) -> np.ndarray:
        """A fact's vector; a registered embedding model that fails is ``UpstreamFailed``, as the LLM's failure
        is recorded once (``RegisteredChat``)."""
        try:
            return await self.models.query_vector(embedding, choice, fact)
        except (UpstreamFailed, *STORE_FAILURES):
            raise
        except ServiceError as error:
            raise UpstreamFailed(f"The embedding model failed: {error.reason}") from None

    async def _llm_json(
        self, job: InferJob, step: str, chat: ChatModel | None, system_prompt: str, user_prompt: str, path: str
    ) -> dict[str, Any]:
        """The LLM's answer for one ``step`` of the job's run: the one an earlier try kept, else a call whose
        answer is kept with the job before the run goes on, so that a retry (a k-NN search or a write failed
        after the call) never calls the LLM again for it."""
        answer = job.answers.get(step)
        if answer is None:
            if chat is None:
                raise LLMError(NO_LLM)
            answer = await chat.complete(system_prompt, user_prompt)
            job.answers[step] = answer
            if not await self.jobs.keep_infer_answers(job):
                raise LeaseLost(job.job_id)
        return first_json_object(read_path(answer, path))

    async def _run_strategy(
        self, run: InferRun, strategy: Strategy, scope: dict[str, str], next_id: Callable[[], str]
    ) -> list[LongTermChange]:
        """Extract facts, find similar memories, decide, and return the changes (AGENTIC.md 6, steps 1-6)."""
        job, config = run.job, run.container.config
        path = strategy.llm_result_path or run.parameters.get("llm_result_path") or DEFAULT_RESULT_PATH
        system_prompt = strategy.system_prompt or prompts.EXTRACTION[strategy.type]
        if strategy.system_prompt and not prompts.custom_prompt_usable(system_prompt):
            raise LLMError('The strategy system_prompt must ask for JSON with a "facts" array')
        chat = await run.chat(strategy)
        await self._hold(job)
        if run.messages is None:
            raise KeyError("messages")  # a job queued without them: recorded as an internal error
        extracted = await self._llm_json(
            job,
            f"{strategy.id}/extraction",
            chat,
            system_prompt,
            prompts.extraction_user_prompt(run.messages),
            path,
        )
        facts = extracted.get("facts")
        if not isinstance(facts, list) or not all(isinstance(fact, str) for fact in facts):
            raise LLMError('The LLM answer has no "facts" array of strings')
        facts = [valid_unicode(fact.strip()) for fact in facts if fact.strip()]
        if not facts:
            return []
        max_infer = int(config.get("max_infer_size") or 5)
        terms = flat_object_terms({"namespace": scope})
        terms += [("namespace_size", str(len(scope))), ("strategy_id", strategy.id)]
        similar = LongTermScope(job.owner, job.container_id, terms)
        await self.embeddings.drain()  # earlier runs' memories must be findable
        embedding = await run.embedding()
        old: dict[str, tuple[str, float]] = {}
        for fact in facts[:max_infer]:
            await self._hold(job)
            vector = await self._fact_vector(embedding, run.container.embedding, fact)
            for doc, cosine in await self.ranking.knn(similar, vector, max_infer):
                score = cosine_score(cosine)
                if doc.id not in old or old[doc.id][1] < score:
                    old[doc.id] = (str(doc.source.get("memory", "")), score)
        now = now_millis()
        if not old:
            return [_add(run, strategy, scope, fact, now, next_id()) for fact in facts]
        old_memory = [{"id": key, "text": memory, "score": round(score, 6)} for key, (memory, score) in old.items()]
        await self._hold(job)
        decision_prompt = prompts.decision_user_prompt(old_memory, facts)
        decided = await self._llm_json(job, f"{strategy.id}/decision", chat, prompts.DECISION, decision_prompt, path)
        decisions = decided.get("memory_decision")
        if not isinstance(decisions, list):
            raise LLMError('The LLM answer has no "memory_decision" array')
        changes: list[LongTermChange] = []
        for decision in decisions:
            if not isinstance(decision, dict):
                continue
            event = str(decision.get("event", "")).upper()
            memory_text = decision.get("text")
            target = str(decision.get("id", ""))
            if isinstance(memory_text, str):
                memory_text = valid_unicode(memory_text)
            if event == "ADD" and isinstance(memory_text, str) and memory_text.strip():
                changes.append(_add(run, strategy, scope, memory_text.strip(), now, next_id()))
            elif event in ("UPDATE", "DELETE") and target in old:  # only memories this run retrieved
                before = old[target][0]
                if event == "UPDATE" and isinstance(memory_text, str) and memory_text.strip():
                    changes.append(
                        LongTermChange(
                            "UPDATE",
                            target,
                            memory=memory_text.strip(),
                            last_updated_time=now,
                            doc={"before": before},
                            source=dict(run.source) if run.source is not None else None,
                        )
                    )
                elif event == "DELETE":
                    changes.append(LongTermChange("DELETE", target, doc={"before": before}))
        return changes


def job_ids(job: InferJob) -> Callable[[], str]:
    """The ids a run of ``job`` writes, in order: derived from the job (its working memory's id, unique to the
    add that queued it) and their position, never random, so that the same run applied twice writes the same
    documents."""
    seed = job.request.get("working_memory_id") or job.job_id
    positions = itertools.count()
    return lambda: derived_id("infer", seed, next(positions))


def _add(
    run: InferRun, strategy: Strategy, scope: dict[str, str], fact: str, now: int, memory_id: str
) -> LongTermChange:
    job = run.job
    memory = LongTermMemory(
        fact, strategy, scope, owner_id(job.owner), job.container_id, created_time=now, tags=run.tags
    )
    doc = memory.to_source()
    if run.source is not None:
        doc[SOURCES] = [{**run.source, "memory": fact}]
    return LongTermChange("ADD", memory_id, doc=doc, source=dict(run.source) if run.source is not None else None)


def _history_record(run: InferRun, change: LongTermChange, scope: dict[str, str]) -> dict[str, Any]:
    record: dict[str, Any] = {
        "owner_id": owner_id(run.job.owner),
        "memory_container_id": run.job.container_id,
        "memory_id": change.memory_id,
        "action": change.event,
        "namespace": scope,
        "namespace_size": len(scope),
    }
    if run.tags:
        record["tags"] = run.tags
    record["created_time"] = now_millis()
    _record_source(run, record)
    if change.event == "ADD" and change.doc is not None:
        record["after"] = {"memory": change.doc["memory"]}
    elif change.event == "UPDATE":
        record["before"] = {"memory": (change.doc or {}).get("before")}
        record["after"] = {"memory": change.memory}
    elif change.event == "DELETE":
        record["before"] = {"memory": (change.doc or {}).get("before")}
    return record


def _error_record(run: InferRun, scope: dict[str, str], error: str) -> dict[str, Any]:
    record: dict[str, Any] = {"memory_container_id": run.job.container_id, "created_time": now_millis()}
    if scope:
        record["namespace"] = scope
        record["namespace_size"] = len(scope)
    if run.tags:
        record["tags"] = run.tags
    record["owner_id"] = owner_id(run.job.owner)
    record["error"] = error
    _record_source(run, record)
    return record


def _record_source(run: InferRun, record: dict[str, Any]) -> None:
    """A history entry records the run's source (hidden), so that forgetting the source finds it."""
    if run.source is not None:
        record[SOURCES] = [dict(run.source)]
