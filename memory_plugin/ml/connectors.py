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
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import re2

from memory_plugin.errors import InvalidArgument, OpenSearchBadRequest
from memory_plugin.ml.connector_requests import Action
from memory_plugin.ml.results import Inference, Tensor

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


def embedding_tensor(vector: Any) -> Tensor:
    if not isinstance(vector, list) or not all(_finite_number(x) for x in vector):
        raise RemoteAnswerError("the remote model's answer has an embedding that is not a list of numbers")
    return Tensor("sentence_embedding", "FLOAT32", (len(vector),), vector)


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
    if java_uri_error(url) is not None:  # a placeholder left unfilled, a call's escaped "\/": nothing is sent
        raise _refused_url(action.url, parameters, credential)
    return Prepared(action.method.upper(), url, headers, body, masked(action.url, parameters), guarded)


def _refused_url(template: str, parameters: Mapping[str, str], credential: Mapping[str, str]) -> InvalidArgument:
    """ml-commons' refusal of a URL ``URI.create`` refuses (the real node's words, checked), with the
    credentials masked; one that only a credential breaks is named without it."""
    shown = fill(template, parameters, dict.fromkeys(credential, MASK))
    reason = java_uri_error(shown)
    if reason is None:
        return InvalidArgument(f"the connector's URL is not a valid URL: {shown}", parameter="url")
    cause = {"type": "u_r_i_syntax_exception", "reason": reason}
    return OpenSearchBadRequest(reason, exception="illegal_argument_exception", parameter="url", caused_by=cause)


# -- java.net.URI's refusal, word for word --------------------------------------------

_ALPHA = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
_UNRESERVED = _ALPHA + "0123456789" + "-_.!~*'()"
_URIC = _UNRESERVED + ";/?:@&=+$,[]"  # query, fragment
_PATH = _UNRESERVED + ":@&=+$,;/"
_AUTHORITY = _UNRESERVED + "$,;:@&=+[]"  # a registry name's or a server's (user info, host, port)
_SCHEME = _ALPHA + "0123456789+-."
_HEX = "0123456789abcdefABCDEF"


def java_uri_error(url: str) -> str | None:
    """``URI.create(url)``'s message (``URISyntaxException``'s ``reason at index i: input``, ``i`` in UTF-16
    units), or None when Java takes ``url``: as much of ``java.net.URI.Parser`` as a connector URL meets."""
    end = len(url)

    def fail(reason: str, index: int) -> str:
        return f"{reason} at index {len(url[:index].encode('utf-16-le')) // 2}: {url}"

    def check(start: int, stop: int, legal: str, what: str, *, escapes: bool = True) -> str | None:
        """``checkChars``: the first character that is not ``legal`` (nor, with ``escapes``, an escape pair
        or visible non-ASCII)."""
        index = start
        while index < stop:
            char = url[index]
            if char in legal:
                index += 1
            elif not escapes:
                return fail(f"Illegal character in {what}", index)
            elif char == "%":
                if index + 3 > stop or url[index + 1] not in _HEX or url[index + 2] not in _HEX:
                    return fail("Malformed escape pair", index)
                index += 3
            elif ord(char) > 128 and not _space_or_control(char):
                index += 1
            else:
                return fail(f"Illegal character in {what}", index)
        return None

    def find(stops: str, start: int) -> int:
        return next((i for i in range(start, end) if url[i] in stops), end)

    position = 0
    colon = find("/?#:", 0)
    if colon < end and url[colon] == ":":
        if colon == 0:
            return fail("Expected scheme name", 0)
        error = check(0, 1, _ALPHA, "scheme name", escapes=False) or check(
            1, colon, _SCHEME, "scheme name", escapes=False
        )
        if error is not None:
            return error
        position = colon + 1
        if not url.startswith("/", position):  # an opaque URI
            stop = find("#", position)
            if stop <= position:
                return fail("Expected scheme-specific part", position)
            error = check(position, stop, _URIC, "opaque part")
            return error or (check(stop + 1, end, _URIC, "fragment") if stop < end else None)
    if url.startswith("//", position):
        position += 2
        stop = find("/?#", position)
        if stop > position:
            error = check(position, stop, _AUTHORITY, "authority")
            if error is not None:  # neither a server nor a registry name: Java names the authority's start
                return error if error.startswith("Malformed") else fail("Illegal character in authority", position)
            position = stop
        elif stop == end:
            return fail("Expected authority", position)
    stop = find("?#", position)
    error = check(position, stop, _PATH, "path")
    if error is None and stop < end and url[stop] == "?":
        position, stop = stop + 1, find("#", stop + 1)
        error = check(position, stop, _URIC, "query")
    if error is None and stop < end:
        error = check(stop + 1, end, _URIC, "fragment")
    return error


def _space_or_control(char: str) -> bool:
    """Java's ``Character.isSpaceChar`` or ``isISOControl``."""
    return unicodedata.category(char) in ("Zs", "Zl", "Zp") or ord(char) <= 0x1F or 0x7F <= ord(char) <= 0x9F


#: What no HTTP header name or value may hold (RFC 9110 5.5): line breaks and the other control characters.
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def _null_default(parameters: Mapping[str, str]) -> Callable[[re.Match[str]], str]:
    return lambda m: m.group(0) if parameters.get(m.group(1)) is not None else "null"


def outputs(action: Action, status: int, raw: bytes, text_docs: Sequence[str] | None) -> Inference:
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
        return Inference(tuple(embedding_tensor(v) for v in vectors), status)
    if function is not None:
        raise InvalidArgument(
            f"post_process_function [{function}] is a script; only the built-in functions "
            f"{sorted(POST_PROCESS)} are run here",
            parameter="post_process_function",
        )
    data = as_gson(answer) if isinstance(answer, dict) else {"response": raw.decode("utf-8", "replace")}
    return Inference((Tensor("response", data_as_map=data),), status)
