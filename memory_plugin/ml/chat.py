"""A registered remote model as agentic memory's chat model: what ``llm_id`` names."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from memory_plugin.auth import Principal
from memory_plugin.ml.errors import StatusError
from memory_plugin.ml.requests import PredictInput

if TYPE_CHECKING:
    from memory_plugin.ml.service import MLService


class RemoteChat:
    """A registered remote model called as ml-commons' agentic memory calls it: ``_predict`` with the
    parameters ``system_prompt`` and ``user_prompt`` (and ``messages``, the two as an OpenAI chat list, for
    connectors written for chat completions).  The answer is the remote JSON, as ``dataAsMap`` shows it."""

    def __init__(self, service: MLService, owner: Principal, model_id: str) -> None:
        self.service, self.owner, self.model_id = service, owner, model_id

    async def complete(self, system_prompt: str, user_prompt: str) -> dict[str, Any]:
        model = await self.service._model(self.owner, self.model_id, "Failed to find model")  # it may be gone since
        messages = [{"role": "system", "content": system_prompt}, {"role": "user", "content": user_prompt}]
        parameters = {
            "system_prompt": system_prompt,
            "user_prompt": user_prompt,
            "messages": json.dumps(messages, ensure_ascii=False),
        }
        result = await self.service._call_remote(
            self.owner, self.model_id, model.source, PredictInput(parameters, None)
        )
        output = result["output"][0] if result.get("output") else {}
        answer = output.get("dataAsMap")
        if not isinstance(answer, dict):
            raise StatusError("the remote model's answer is not a JSON object", 502)
        return answer

    async def close(self) -> None:
        """Nothing to close: calls go through the service's client."""
