"""A deterministic OpenAI-compatible server for remote-model tests: chat completions and embeddings.

Unlike :mod:`tests.support.agentic_llm` (which scripts the agentic memory prompts),
this one answers *any* request the same way every time, so that two servers
calling it through their connectors get identical answers:

* ``POST /v1/chat/completions`` answers ``"scripted answer to: <last message's content>"``;
* ``POST /v1/embeddings`` answers, for each input, :func:`embedding_of` it: three floats,
  derived from a hash of the text, each a multiple of 1/128 (exact in float32).

Every request is recorded with its headers, so a test can say which ``Authorization``
a connector sent; :meth:`ScriptedOpenAI.take` hands out what came in since the last take,
in a form two servers' requests can be compared in (only the headers a connector sets).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

#: Headers a connector chooses; the rest (Host, User-Agent, Content-Length, ...) are its HTTP client's.
CONNECTOR_HEADERS = ("authorization", "x-scripted")
DIMENSION = 3
CREATED = 1_700_000_000


def embedding_of(text: str) -> list[float]:
    """Three numbers in [-1, 1) from the text's SHA-256, each exact in float32."""
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return [(b - 128) / 128 for b in digest[:DIMENSION]]


def answer_to(messages: Any) -> str:
    last = messages[-1] if isinstance(messages, list) and messages else {}
    content = last.get("content") if isinstance(last, dict) else None
    return f"scripted answer to: {content if isinstance(content, str) else json.dumps(content)}"


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any  # parsed JSON, or the raw text when it is not JSON

    @property
    def authorization(self) -> str | None:
        return self.headers.get("authorization")

    def comparable(self) -> dict[str, Any]:
        """What the connector decided: method, path, its own headers, the body."""
        headers = {k: v for k, v in self.headers.items() if k in CONNECTOR_HEADERS}
        return {"method": self.method, "path": self.path, "headers": headers, "body": self.body}


@dataclass
class ScriptedOpenAI:
    #: Where it listens, once served (``http://127.0.0.1:<port>``).
    url: str = ""
    requests: list[Recorded] = field(default_factory=list)
    #: When set, every answer is this status with an OpenAI-style error body.
    fail_with: int | None = None
    _taken: int = 0

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_post("/v1/embeddings", self.embeddings)
        return app

    def take(self) -> list[dict[str, Any]]:
        """The requests that came in since the last take, as :meth:`Recorded.comparable`."""
        new, self._taken = self.requests[self._taken :], len(self.requests)
        return [r.comparable() for r in new]

    async def _record(self, request: web.Request) -> Any:
        text = await request.text()
        try:
            body: Any = json.loads(text)
        except ValueError:
            body = text
        headers = {k.lower(): v for k, v in request.headers.items()}
        self.requests.append(Recorded(request.method, request.path_qs, headers, body))
        return body

    def _failure(self) -> web.Response | None:
        if self.fail_with is None:
            return None
        error = {"message": "scripted failure", "type": "server_error", "param": None, "code": None}
        return web.json_response({"error": error}, status=self.fail_with)

    async def chat(self, request: web.Request) -> web.Response:
        body = await self._record(request)
        failure = self._failure()
        if failure is not None:
            return failure
        messages = body.get("messages") if isinstance(body, dict) else None
        model = body.get("model", "scripted") if isinstance(body, dict) else "scripted"
        return web.json_response(
            {
                "id": "chatcmpl-scripted",
                "object": "chat.completion",
                "created": CREATED,
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": answer_to(messages)},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 7, "completion_tokens": 5, "total_tokens": 12},
            }
        )

    async def embeddings(self, request: web.Request) -> web.Response:
        body = await self._record(request)
        failure = self._failure()
        if failure is not None:
            return failure
        given = body.get("input") if isinstance(body, dict) else None
        texts = [given] if isinstance(given, str) else given if isinstance(given, list) else []
        data = [
            {"object": "embedding", "index": i, "embedding": embedding_of(t if isinstance(t, str) else json.dumps(t))}
            for i, t in enumerate(texts)
        ]
        model = body.get("model", "scripted") if isinstance(body, dict) else "scripted"
        return web.json_response(
            {"object": "list", "data": data, "model": model, "usage": {"prompt_tokens": 4, "total_tokens": 4}}
        )


def chat_connector(url: str, key: str, **extra: Any) -> dict[str, Any]:
    """ml-commons' documented OpenAI chat connector blueprint, pointed at a server at ``url`` with the key ``key``."""
    return {
        "name": "scripted chat",
        "description": "an OpenAI-compatible chat model",
        "version": 1,
        "protocol": "http",
        "parameters": {"endpoint": url.removeprefix("http://"), "model": "gpt-4o-mini"},
        "credential": {"openAI_key": key},
        "actions": [
            {
                "action_type": "predict",
                "method": "POST",
                "url": "http://${parameters.endpoint}/v1/chat/completions",
                "headers": {"Authorization": "Bearer ${credential.openAI_key}"},
                "request_body": '{ "model": "${parameters.model}", "messages": ${parameters.messages} }',
            }
        ],
        **extra,
    }


def embedding_connector(url: str, key: str) -> dict[str, Any]:
    """ml-commons' documented OpenAI embedding connector blueprint, pointed at a server at ``url``."""
    return {
        "name": "scripted embeddings",
        "version": "1",
        "protocol": "http",
        "parameters": {"model": "text-embedding-3-small"},
        "credential": {"openAI_key": key},
        "actions": [
            {
                "action_type": "predict",
                "method": "POST",
                "url": f"{url}/v1/embeddings",
                "headers": {"Authorization": "Bearer ${credential.openAI_key}"},
                "request_body": '{ "input": ${parameters.input}, "model": "${parameters.model}" }',
                "pre_process_function": "connector.pre_process.openai.embedding",
                "post_process_function": "connector.post_process.openai.embedding",
            }
        ],
    }


@contextmanager
def scripted_openai() -> Iterator[ScriptedOpenAI]:
    """A :class:`ScriptedOpenAI` on a free loopback port, served in a thread of its own (``url`` set)."""
    from tests.support.live import served_in_thread

    llm = ScriptedOpenAI()
    with served_in_thread(llm.app()) as url:
        llm.url = url
        yield llm


if __name__ == "__main__":  # run by hand: python -m tests.support.scripted_openai [port]
    import sys

    web.run_app(ScriptedOpenAI().app(), host="127.0.0.1", port=int(sys.argv[1]) if len(sys.argv) > 1 else 0)
