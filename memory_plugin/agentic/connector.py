"""The LLM connector: an OpenAI-compatible chat-completions endpoint, called with aiohttp."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import aiohttp

from memory_plugin.agentic.llm import LLMError


@dataclass(frozen=True)
class LLMSettings:
    url: str
    api_key: str | None = None
    model: str = "gpt-4o-mini"
    timeout: float = 30.0


class OpenAIChat:
    """POST ``{model, messages:[system, user], temperature: 0}``; the parsed JSON response comes back."""

    def __init__(self, settings: LLMSettings) -> None:
        self.settings = settings
        self._session: aiohttp.ClientSession | None = None

    async def complete(self, system_prompt: str, user_prompt: str) -> dict[str, Any]:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.settings.timeout))
        headers = {"Content-Type": "application/json"}
        if self.settings.api_key:
            headers["Authorization"] = f"Bearer {self.settings.api_key}"
        body = {
            "model": self.settings.model,
            "temperature": 0,
            "messages": [{"role": "system", "content": system_prompt}, {"role": "user", "content": user_prompt}],
        }
        try:
            async with self._session.post(self.settings.url, json=body, headers=headers) as response:
                raw = await response.text()
                if response.status != 200:
                    raise LLMError(f"LLM endpoint answered {response.status}: {raw[:300]}")
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise LLMError(f"LLM endpoint failed: {type(exc).__name__}: {exc}") from exc
        try:
            answer = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise LLMError(f"LLM endpoint answered with invalid JSON: {exc.msg}") from exc
        if not isinstance(answer, dict):
            raise LLMError("LLM endpoint answered with a JSON value that is not an object")
        return answer

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
