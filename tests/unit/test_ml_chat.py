"""Agentic memory's chat and embedding models call any ``Predictor``: the calls they make, and what they read
of the answers."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from memory_plugin.auth import Principal
from memory_plugin.errors import StatusError
from memory_plugin.ml.chat import Predictor, RemoteChat, RemoteEmbedding
from memory_plugin.ml.model_requests import PredictInput
from memory_plugin.ml.results import Inference, Tensor

OWNER = Principal("org-1", "alice")


class Recorded:
    def __init__(self, answer: Inference) -> None:
        self.answer = answer
        self.calls: list[tuple[Principal, str, PredictInput]] = []

    async def predict_remote(self, owner: Principal, model_id: str, request: PredictInput) -> Inference:
        self.calls.append((owner, model_id, request))
        return self.answer


async def test_a_chat_model_sends_both_prompts_and_answers_the_remote_json() -> None:
    predictor = Recorded(Inference((Tensor("response", data_as_map={"facts": ["x"]}),)))
    chat = RemoteChat(predictor, OWNER, "model-1")
    assert await chat.complete("be brief", "hello") == {"facts": ["x"]}
    [(owner, model_id, request)] = predictor.calls
    assert (owner, model_id, request.text_docs) == (OWNER, "model-1", None)
    assert request.parameters is not None
    assert (request.parameters["system_prompt"], request.parameters["user_prompt"]) == ("be brief", "hello")
    assert '"role": "system"' in request.parameters["messages"]


async def test_a_chat_answer_that_is_no_json_object_is_a_502() -> None:
    with pytest.raises(StatusError) as raised:
        not_an_object: Any = "text"
        answer = Inference((Tensor("response", data_as_map=not_an_object),))
        await RemoteChat(Recorded(answer), OWNER, "m").complete("s", "u")
    assert raised.value.status == 502


async def test_an_embedding_model_embeds_every_text_in_one_call() -> None:
    predictor: Predictor = Recorded(Inference((Tensor("e", data=[1.0, 0.0]), Tensor("e", data=[0.0, 2.0]))))
    vectors = await RemoteEmbedding(predictor, OWNER, "embedder").passages(["a", "b"])
    assert vectors.dtype == np.float32 and vectors.tolist() == [[1.0, 0.0], [0.0, 2.0]]
    assert isinstance(predictor, Recorded) and predictor.calls[0][2] == PredictInput(None, ["a", "b"])
