"""What a connector turns a predict call into, and what it turns the answer back into.

Templates are ml-commons' ``StringSubstitutor`` ones: ``${parameters.x}``,
``${parameters.x:-default}`` and ``${credential.x}``; a placeholder with no value
stays as written, and a body that is then not JSON is ml-commons' "Invalid
payload" 400 (with credentials masked: the real node would print them).  The
built-in pre- and post-process functions are ml-commons' (OpenAI, Cohere,
Bedrock and default embeddings); painless scripts are not run here.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import re2

from memory_plugin.errors import InvalidArgument
from memory_plugin.ml.requests import Action

PLACEHOLDER = re.compile(r"\$\{(parameters|credential)\.([^}:]+)(?::-([^}]*))?\}")
MASK = "*****"


def fill(template: str, parameters: Mapping[str, str], credential: Mapping[str, str] | None = None) -> str:
    """Replace every placeholder that has a value (or a default); leave the others as written."""

    def value(match: re.Match[str]) -> str:
        source = parameters if match.group(1) == "parameters" else (credential or {})
        found = source.get(match.group(2))
        if found is None:
            return match.group(3) if match.group(3) is not None else match.group(0)
        return found

    return PLACEHOLDER.sub(value, template)


def masked(template: str, parameters: Mapping[str, str]) -> str:
    """``fill`` for messages: credentials never appear in them."""
    return PLACEHOLDER.sub(
        lambda m: MASK if m.group(1) == "credential" else (parameters.get(m.group(2)) or m.group(3) or m.group(0)),
        template,
    )


def trusted(url: str, patterns: Sequence[str]) -> bool:
    """Java's ``Pattern.matches``, run by RE2: linear in the URL whatever the patterns (no backtracking)."""
    return any(_compiled(pattern).fullmatch(url) for pattern in patterns)


@functools.lru_cache(maxsize=64)
def _compiled(pattern: str) -> Any:
    return re2.compile(pattern)


def check_urls(actions: Sequence[Action], parameters: Mapping[str, str], patterns: Sequence[str]) -> None:
    """``validateConnectorURL``: each action's URL, its parameters filled in, matches a trusted pattern."""
    for action in actions:
        url = fill(action.url, parameters)
        if not trusted(url, patterns):
            raise InvalidArgument(
                f"Connector URL is not matching the trusted connector endpoint regex, URL is: {url}", parameter="url"
            )


# -- pre-process: text_docs to parameters ----------------------------------------------


def _docs_as_input(docs: Sequence[str]) -> dict[str, str]:
    return {"input": json.dumps(list(docs), ensure_ascii=False)}


def _bedrock_input(docs: Sequence[str]) -> dict[str, str]:
    return {"inputText": docs[0] if docs else ""}


def _cohere_input(docs: Sequence[str]) -> dict[str, str]:
    return {"texts": json.dumps(list(docs), ensure_ascii=False)}


DEFAULT_PRE_PROCESS = "connector.pre_process.default.embedding"
PRE_PROCESS: dict[str, Callable[[Sequence[str]], dict[str, str]]] = {
    "connector.pre_process.openai.embedding": _docs_as_input,
    "connector.pre_process.default.embedding": _docs_as_input,
    "connector.pre_process.cohere.embedding": _cohere_input,
    "connector.pre_process.bedrock.embedding": _bedrock_input,
}

# -- post-process: a remote answer to tensors -------------------------------------------


def _openai_vectors(answer: Any) -> Any:
    return [item.get("embedding") for item in answer.get("data", [])] if isinstance(answer, dict) else None


def _default_vectors(answer: Any) -> Any:
    return answer if isinstance(answer, list) else None


def _cohere_vectors(answer: Any) -> Any:
    return answer.get("embeddings") if isinstance(answer, dict) else None


def _bedrock_vectors(answer: Any) -> Any:
    return [answer.get("embedding")] if isinstance(answer, dict) else None


POST_PROCESS: dict[str, Callable[[Any], Any]] = {
    "connector.post_process.openai.embedding": _openai_vectors,
    "connector.post_process.default.embedding": _default_vectors,
    "connector.post_process.cohere.embedding": _cohere_vectors,
    "connector.post_process.bedrock.embedding": _bedrock_vectors,
}


def embedding_tensor(vector: Any) -> dict[str, Any]:
    if not isinstance(vector, list) or not all(_finite_number(x) for x in vector):
        raise RemoteAnswerError("the remote model's answer has an embedding that is not a list of numbers")
    return {"name": "sentence_embedding", "data_type": "FLOAT32", "shape": [len(vector)], "data": vector}


def _finite_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


class RemoteAnswerError(InvalidArgument):
    """The remote model answered something its post-process function cannot read."""


def as_gson(value: Any) -> Any:
    """ml-commons reads a remote answer with Gson, which makes every number a double."""
    if isinstance(value, dict):
        return {key: as_gson(item) for key, item in value.items()}
    if isinstance(value, list):
        return [as_gson(item) for item in value]
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


@dataclass(frozen=True)
class Prepared:
    """One outgoing request, credentials filled in: it never leaves the connector's call."""

    method: str
    url: str
    headers: dict[str, str]
    body: str | None
    #: ``url`` with its credentials masked: what messages show of it.
    shown_url: str = ""
    #: ``body`` with its credentials left unfilled: ml-commons' payload, which input guardrails read.
    guarded: str | None = None


def escaped(value: str) -> str:
    """``escapeRemoteInferenceInputData``: a predict parameter that is not a JSON object or array is
    JSON-escaped (Apache commons-text's ``escapeJson``), so that ``"${parameters.x}"`` stays a string."""
    if value.lstrip().startswith(("{", "[")):
        try:
            json.loads(value)
            return value
        except ValueError:
            pass
    return json.dumps(value)[1:-1].replace("/", "\\/")


def prepare(
    action: Action,
    connector_parameters: Mapping[str, str],
    call_parameters: Mapping[str, str] | None,
    credential: Mapping[str, str],
    text_docs: Sequence[str] | None,
) -> Prepared:
    """The request ``action`` makes (``preparePayloadAndInvoke``): the connector's parameters, then the
    call's (escaped), then what the pre-process function makes of ``text_docs``, the call's again on top."""
    given = {key: escaped(value) for key, value in (call_parameters or {}).items()}
    parameters = {**connector_parameters, **given}
    if text_docs is not None:
        function = action.pre_process_function or DEFAULT_PRE_PROCESS  # ml-commons' default for text_docs
        if function not in PRE_PROCESS:
            raise InvalidArgument(
                f"pre_process_function [{function}] is a script; only the built-in functions "
                f"{sorted(PRE_PROCESS)} are run here",
                parameter="pre_process_function",
            )
        parameters.update({key: escaped(value) for key, value in PRE_PROCESS[function](text_docs).items()})
        parameters.update(given)
    body = guarded = None
    if action.request_body is not None:
        template = re.sub(r'"\$\{parameters\.(\w+):-null\}"', _null_default(parameters), action.request_body)
        body = fill(template, parameters, credential)
        guarded = fill(template, parameters)
        try:
            json.loads(body)
        except ValueError:
            raise InvalidArgument(
                f"Invalid payload: {masked(template, parameters)}", parameter="request_body"
            ) from None
        unfilled = re.findall(r"\$\{parameters\.([^}]+)\}", body)
        if unfilled:
            raise InvalidArgument(
                "Some parameter placeholder not filled in payload: " + ", ".join(unfilled), parameter="parameters"
            )
    elif "http_body" in parameters:
        body = guarded = parameters["http_body"]
    # ml-commons fills headers once per connector (``createDecryptedHeaders``): credentials and the
    # connector's own parameters, never those of the predict call
    headers = {name: fill(value, connector_parameters, credential) for name, value in (action.headers or {}).items()}
    for name, value in headers.items():
        if _CONTROL.search(name) or _CONTROL.search(value):  # a header split in two, or cut short
            raise InvalidArgument(f"the connector's header [{name!r}] holds a control character", parameter="headers")
    url = fill(action.url, parameters, credential)
    return Prepared(action.method.upper(), url, headers, body, masked(action.url, parameters), guarded)


#: What no HTTP header name or value may hold (RFC 9110 5.5): line breaks and the other control characters.
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def _null_default(parameters: Mapping[str, str]) -> Callable[[re.Match[str]], str]:
    return lambda m: m.group(0) if parameters.get(m.group(1)) is not None else "null"


def outputs(action: Action, status: int, raw: bytes, text_docs: Sequence[str] | None) -> dict[str, Any]:
    """One ``inference_results`` entry from the remote answer, as ml-commons renders it."""
    try:
        answer: Any = json.loads(raw)
    except ValueError:
        answer = None
    function = action.post_process_function
    if function is not None and function in POST_PROCESS:
        vectors = POST_PROCESS[function](answer)
        if not isinstance(vectors, list):
            raise RemoteAnswerError("the remote model's answer is not the shape its post_process_function reads")
        return {"output": [embedding_tensor(v) for v in vectors], "status_code": status}
    if function is not None:
        raise InvalidArgument(
            f"post_process_function [{function}] is a script; only the built-in functions "
            f"{sorted(POST_PROCESS)} are run here",
            parameter="post_process_function",
        )
    data = as_gson(answer) if isinstance(answer, dict) else {"response": raw.decode("utf-8", "replace")}
    return {"output": [{"name": "response", "dataAsMap": data}], "status_code": status}
