"""A small local OpenAI-compatible chat-completions server with scripted answers.

The connector under test is the real one (``memory_plugin.agentic.connector.OpenAIChat``):
it speaks HTTP to this server.  Answers are chosen by what is asked: a session
summary, a fact extraction (``facts`` per strategy type, or a function of the
user prompt) or a memory decision (a function of the old memories and facts).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from typing import Any

from aiohttp import web

#: A container of the built-in model (384 dimensions) with one semantic strategy per user, whose LLM is ``chat``.
SEMANTIC_CONFIG = {
    "embedding_model_type": "text_embedding",
    "embedding_model_id": "built-in",
    "embedding_dimension": 384,
    "llm_id": "chat",
    "strategies": [{"type": "semantic", "namespace": ["user_id"]}],
}

Decide = Callable[[list[dict[str, Any]], list[str]], list[dict[str, Any]]]


def payload_of(user_prompt: str) -> Any:
    return json.loads(re.search(r"```json\n(.*)\n```", user_prompt, re.S).group(1))  # type: ignore[union-attr]


def add_all(old: list[dict[str, Any]], facts: list[str]) -> list[dict[str, Any]]:
    return [{"id": o["id"], "text": o["text"], "event": "NONE"} for o in old] + [
        {"id": "new", "text": fact, "event": "ADD"} for fact in facts
    ]


class ScriptedLLM:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.facts: Callable[[str, list[dict[str, Any]]], list[str]] = lambda kind, messages: []
        self.decide: Decide = add_all
        self.summary = "Billing question"
        self.fail_with: int | None = None
        self.raw_content: str | None = None
        self.api_keys: list[str | None] = []
        #: Extraction calls for these strategy types wait until ``release`` is set (a hanging LLM).
        self.hang: set[str] = set()
        self.release = asyncio.Event()

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.complete)
        return app

    async def complete(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(body)
        self.api_keys.append(request.headers.get("Authorization"))
        if self.fail_with is not None:
            return web.json_response({"error": {"message": "scripted failure"}}, status=self.fail_with)
        system, user = body["messages"][0]["content"], body["messages"][1]["content"]
        if self.raw_content is not None:
            content = self.raw_content
        elif "title conversations" in system:
            content = self.summary
        elif "memory store" in system:
            payload = payload_of(user)
            content = json.dumps({"memory_decision": self.decide(payload["old_memory"], payload["retrieved_facts"])})
        else:
            kind = "USER_PREFERENCE" if "preferences" in system else "SUMMARY" if "summaries" in system else "SEMANTIC"
            messages = payload_of(user)[:-1]  # the trailing reminder is ours
            if kind in self.hang:
                await self.release.wait()
            content = "Here you go:\n" + json.dumps({"facts": self.facts(kind, messages)})
        return web.json_response(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "model": body["model"],
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
                ],
            }
        )
