"""This server as ml-commons' remote agentic memory (``REMOTE_AGENTIC_MEMORY``, issue 27 item 4).

The requests below are transcribed from ml-commons' client (main, 3.9-dev):
``ml-algorithms/.../engine/memory/RemoteAgenticConversationMemory.java`` builds the bodies and the
connector actions (paths, methods, ``Content-Type: application/json``), ``ConnectorUtils.buildSdkRequest``
adds ``Content-Length``, and ``ConnectorUtils.signRequest`` signs with the AWS SDK's ``AwsV4HttpSigner``
(payload signing on: ``x-amz-content-sha256`` set and signed; service ``aoss`` for endpoints outside
``*.es.amazonaws.com``).  They are signed here with botocore as that signer would, sent to the in-process
server, and its answers are read as the client reads them (``parseAddMemoryResponse``,
``SearchResponse.fromXContent`` then ``convertHitToInteraction``, ``MLWorkingMemory.parse``,
``UpdateResponse.fromXContent``).  docs/remote-agentic-memory.md lists every request.
Runs on both backends (``backend``: embedded, and OpenSearch in the full suite).
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from memory_plugin.app import create_app
from memory_plugin.errors import Unauthorized
from memory_plugin.settings import Settings, load_settings
from memory_plugin.sigv4 import SignedRequest, SigV4Verifier, load_keys
from tests.conftest import Caller

pytestmark = pytest.mark.backends("embedded", "opensearch")

BASE = "/_plugins/_ml/memory_containers"
REGION, SERVICE = "us-west-2", "aoss"
ACCESS_KEY, SECRET_KEY = "AKIAEXAMPLEAGENT0001", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


@pytest.fixture
def sigv4_file(tmp_path: Path) -> Path:
    path = tmp_path / "sigv4-keys.json"
    keys = [
        {
            "access_key_id": ACCESS_KEY,
            "secret_access_key": SECRET_KEY,
            "organization_id": "org-1",
            "user_id": "agent",
            "backend_roles": ["agents"],
        }
    ]
    path.write_text(json.dumps({"keys": keys}))
    path.chmod(0o600)
    return path


@pytest.fixture
def remote_settings(settings: Settings, sigv4_file: Path) -> Settings:
    return settings.replace(auth={"sigv4_keys_file": sigv4_file, "sigv4_region": REGION})


@pytest.fixture
async def remote(aiohttp_client, remote_settings: Settings, embedder, alice: Caller):  # type: ignore[no-untyped-def]
    return await aiohttp_client(create_app(remote_settings, embedder=embedder))


def gson(value: dict[str, Any]) -> bytes:
    """``GSON.toJson``: compact, nulls left out."""
    return json.dumps({k: v for k, v in value.items() if v is not None}, separators=(",", ":")).encode()


def signed(
    client,  # type: ignore[no-untyped-def]
    method: str,
    path: str,
    body: bytes | None,
    *,
    at: datetime | None = None,
    secret: str = SECRET_KEY,
    key: str = ACCESS_KEY,
    region: str = REGION,
) -> dict[str, str]:
    """The headers ml-commons' signed request carries: the action's ``Content-Type``, ``Content-Length``
    (0 for a request without body), ``Host``, ``X-Amz-Date``, ``x-amz-content-sha256`` and ``Authorization``."""
    payload = body or b""
    host = f"{client.host}:{client.port}"
    headers = {
        "Content-Type": "application/json",
        "Content-Length": str(len(payload)),
        "Host": host,
        "x-amz-content-sha256": hashlib.sha256(payload).hexdigest(),
    }
    timestamp = (at or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    request = AWSRequest(method=method, url=f"http://{host}{path}", data=payload, headers=headers)
    request.headers["X-Amz-Date"] = timestamp
    request.context["timestamp"] = timestamp
    signer = SigV4Auth(Credentials(key, secret), SERVICE, region)
    signature = signer.signature(signer.string_to_sign(request, signer.canonical_request(request)), request)
    names = signer.signed_headers(signer.headers_to_sign(request))
    authorization = f"AWS4-HMAC-SHA256 Credential={signer.scope(request)}, SignedHeaders={names}, Signature={signature}"
    return {**dict(request.headers.items()), "Authorization": authorization}


async def send(client, method: str, path: str, body: dict[str, Any] | None = None, **sign: Any) -> tuple[int, Any]:  # type: ignore[no-untyped-def]
    data = gson(body) if body is not None else None
    headers = signed(client, method, BASE + path, data, **sign)
    response = await client.request(method, BASE + path, data=data or b"", headers=headers)
    return response.status, await response.json()


def search_hits(response: dict[str, Any]) -> list[dict[str, Any]]:
    """What ``SearchResponse.fromXContent`` needs, and the hits it yields."""
    assert isinstance(response["took"], int) and isinstance(response["timed_out"], bool)
    assert {"total", "successful", "failed"} <= response["_shards"].keys()
    hits = response["hits"]["hits"]
    for hit in hits:
        assert isinstance(hit["_index"], str) and isinstance(hit["_id"], str) and isinstance(hit["_source"], dict)
    return list(hits)


def interaction(hit: dict[str, Any], trace: bool) -> dict[str, Any] | None:
    """``convertHitToInteraction``: an Interaction only from a hit with a non-empty input or response."""
    source = hit["_source"]
    data = source["structured_data_blob"]
    assert isinstance(source["created_time"], int) and isinstance(source["last_updated_time"], int)
    metadata = source.get("metadata", {})
    number = metadata.get("trace_number") if trace else None
    if trace and not isinstance(number, int | float):
        number = data.get("trace_number", source.get("message_id"))
    if not (data.get("input") or data.get("response")):
        return None
    return {
        "id": hit["_id"],
        "input": data.get("input", ""),
        "response": data.get("response", ""),
        "parent": metadata.get("parent_message_id") or (data.get("parent_message_id") if trace else None),
        "trace_number": number,
    }


async def test_the_requests_ml_commons_sends_are_answered_as_it_reads_them(remote, alice: Caller) -> None:  # type: ignore[no-untyped-def]
    # The operator's container, shared with the agent's role (the SigV4 key's principal holds it).
    response = await remote.post(
        BASE + "/_create", json={"name": "agents", "backend_roles": ["agents"]}, headers=alice.headers
    )
    cid = (await response.json())["memory_container_id"]
    # Factory.createSessionInRemoteContainer: create_session, body {"summary": <memory name>}
    status, created = await send(remote, "POST", f"/{cid}/memories/sessions", {"summary": "trip planning"})
    assert status == 200, created
    session = created["session_id"]
    assert isinstance(session, str) and session
    namespace = {"session_id": session, "user_id": "bob"}
    # save(message, parentId=null, traceNum=null): a final message
    message = {
        "memory_container_id": cid,
        "structured_data_blob": {
            "input": "Where should I go in May?",
            "response": "Lisbon is lovely in May.",
            "final_answer": True,
            "create_time": "2026-12-02T05:00:00Z",
            "updated_time": "2026-12-02T05:00:00Z",
        },
        "message_id": None,
        "namespace": namespace,
        "metadata": {"type": "message"},
        "infer": False,
    }
    status, added = await send(remote, "POST", f"/{cid}/memories", message)
    assert status == 200, added
    message_id = added["working_memory_id"]  # parseAddMemoryResponse
    assert isinstance(message_id, str) and added["session_id"] == session
    # save(trace, parentId, traceNum=1, action="search_tool")
    trace = {
        "memory_container_id": cid,
        "structured_data_blob": {
            "input": "weather Lisbon May",
            "response": "22C, sunny",
            "parent_message_id": message_id,
            "trace_number": 1,
            "origin": "search_tool",
            "create_time": "2026-12-02T05:00:01Z",
            "updated_time": "2026-12-02T05:00:01Z",
        },
        "message_id": 1,
        "namespace": namespace,
        "metadata": {"type": "trace", "parent_message_id": message_id, "trace_number": "1", "origin": "search_tool"},
        "infer": False,
    }
    status, _ = await send(remote, "POST", f"/{cid}/memories", trace)
    assert status == 200
    # saveStructuredMessages: getMaxStructuredMessageId first (none yet: -1), then message_id 0, 1
    newest = {
        "query": {
            "bool": {
                "must": [
                    {"term": {"namespace.session_id": session}},
                    {"term": {"metadata.type": "structured_message"}},
                ]
            }
        },
        "size": 1,
        "sort": [{"message_id": "desc"}],
    }
    status, found = await send(remote, "GET", f"/{cid}/memories/working/_search", newest)
    assert status == 200 and search_hits(found) == []
    for number, role in enumerate(("user", "assistant")):
        structured = {
            "memory_container_id": cid,
            "structured_data_blob": {"message": {"role": role, "content": [{"text": f"turn {number}"}]}},
            "message_id": number,
            "namespace": namespace,
            "metadata": {"type": "structured_message", "role": role},
            "infer": False,
        }
        status, _ = await send(remote, "POST", f"/{cid}/memories", structured)
        assert status == 200
    status, found = await send(remote, "GET", f"/{cid}/memories/working/_search", newest)
    assert [hit["_source"]["message_id"] for hit in search_hits(found)] == [1]  # the next id is 2
    # getStructuredMessages: every structured message, by message_id
    status, found = await send(
        remote, "GET", f"/{cid}/memories/working/_search", {**newest, "size": 10000, "sort": [{"message_id": "asc"}]}
    )
    blobs = [hit["_source"]["structured_data_blob"]["message"] for hit in search_hits(found)]
    assert [blob["role"] for blob in blobs] == ["user", "assistant"]
    # getMessages(size): the session's messages, traces left out, oldest first
    history = {
        "query": {
            "bool": {
                "must": [{"term": {"namespace.session_id": session}}],
                "must_not": [{"term": {"metadata.type": "trace"}}],
            }
        },
        "size": 10,
        "sort": [{"created_time": "asc"}],
    }
    status, found = await send(remote, "GET", f"/{cid}/memories/working/_search", history)
    assert status == 200
    interactions = [i for i in (interaction(hit, False) for hit in search_hits(found)) if i is not None]
    assert [(i["id"], i["input"], i["response"]) for i in interactions] == [
        (message_id, "Where should I go in May?", "Lisbon is lovely in May.")
    ]
    # getTraces(parentMessageId)
    traces_query = {
        "query": {
            "bool": {
                "must": [
                    {"term": {"namespace.session_id": session}},
                    {"term": {"metadata.type": "trace"}},
                    {"term": {"metadata.parent_message_id": message_id}},
                ]
            }
        },
        "size": 1000,
        "sort": [{"message_id": "asc"}],
    }
    status, found = await send(remote, "GET", f"/{cid}/memories/working/_search", traces_query)
    [found_trace] = [interaction(hit, True) for hit in search_hits(found)]
    assert found_trace is not None and found_trace["parent"] == message_id and found_trace["trace_number"] == 1
    # update(messageId, {"response": ...}): get_memory (no body), merge, update_memory
    status, memory = await send(remote, "GET", f"/{cid}/memories/working/{message_id}")
    assert status == 200, memory
    # MLWorkingMemory.parse: these fields with these types
    assert memory["memory_container_id"] == cid and memory["payload_type"] == "conversational"
    assert memory["namespace"] == namespace and memory["metadata"] == {"type": "message"}
    assert isinstance(memory["created_time"], int) and memory["infer"] is False
    merged = {**memory["structured_data_blob"], "response": "Lisbon or Porto, both lovely in May."}
    status, updated = await send(
        remote, "PUT", f"/{cid}/memories/working/{message_id}", {"structured_data_blob": merged}
    )
    assert status == 200, updated
    # UpdateResponse.fromXContent
    assert updated["_id"] == message_id and updated["result"] == "updated" and updated["_version"] == 2
    assert isinstance(updated["_index"], str) and isinstance(updated["_seq_no"], int)
    assert isinstance(updated["_primary_term"], int) and updated["_shards"]["successful"] == 1
    status, memory = await send(remote, "GET", f"/{cid}/memories/working/{message_id}")
    assert memory["structured_data_blob"] == merged
    # delete_memory (declared by the connector)
    status, deleted = await send(remote, "DELETE", f"/{cid}/memories/working/{message_id}")
    assert status == 200 and deleted["result"] == "deleted"
    # a missing memory is a 404, the status ml-commons' update retries on (AOSS refresh latency)
    status, missing = await send(remote, "GET", f"/{cid}/memories/working/{message_id}")
    assert status == 404 and missing["status"] == 404
    # the agent's memories are its own: alice (the container's owner) sees none of them
    response = await remote.post(
        BASE + f"/{cid}/memories/working/_search", json={"query": {"match_all": {}}}, headers=alice.headers
    )
    assert (await response.json())["hits"]["hits"] == []


async def refused(client, method: str, path: str, data: bytes, headers: dict[str, str], reason: str) -> None:  # type: ignore[no-untyped-def]
    response = await client.request(method, BASE + path, data=data, headers=headers)
    payload = await response.json()
    assert response.status == 401, payload
    assert payload["status"] == 401 and payload["error"]["type"] == "security_exception", payload
    assert reason in payload["error"]["reason"], payload


async def test_bad_signatures_are_refused(remote, alice: Caller) -> None:  # type: ignore[no-untyped-def]
    response = await remote.post(
        BASE + "/_create", json={"name": "x", "backend_roles": ["agents"]}, headers=alice.headers
    )
    cid = (await response.json())["memory_container_id"]
    path = f"/{cid}/memories/working/_search"
    body = gson({"query": {"match_all": {}}, "size": 1})
    good = signed(remote, "GET", BASE + path, body)
    assert (await remote.request("GET", BASE + path, data=body, headers=good)).status == 200
    # a signature that is not the request's
    forged = {**good, "Authorization": good["Authorization"][:-4] + "0000"}
    await refused(remote, "GET", path, body, forged, "does not match")
    # the body changed after signing: its hash is not the signed one
    other = gson({"query": {"match_all": {}}, "size": 9})
    await refused(remote, "GET", path, other, {**good, "Content-Length": str(len(other))}, "x-amz-content-sha256")
    # and without the hash header, the signature itself covers the body
    unhashed = {k: v for k, v in signed(remote, "GET", BASE + path, body).items()}
    stripped = AWSRequest(method="GET", url=f"http://{remote.host}:{remote.port}{BASE}{path}", data=body)
    stripped.headers["Host"] = f"{remote.host}:{remote.port}"
    stripped.headers["Content-Type"] = "application/json"
    stripped.headers["X-Amz-Date"] = unhashed["X-Amz-Date"]
    stripped.context["timestamp"] = unhashed["X-Amz-Date"]
    signer = SigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY), SERVICE, REGION)
    signature = signer.signature(signer.string_to_sign(stripped, signer.canonical_request(stripped)), stripped)
    names = signer.signed_headers(signer.headers_to_sign(stripped))
    no_hash = {
        **dict(stripped.headers.items()),
        "Authorization": f"AWS4-HMAC-SHA256 Credential={signer.scope(stripped)}, SignedHeaders={names}, Signature={signature}",
    }
    assert (await remote.request("GET", BASE + path, data=body, headers=no_hash)).status == 200
    await refused(remote, "GET", path, other, no_hash, "does not match")
    # expired, and from the future
    for skew in (timedelta(minutes=-16), timedelta(minutes=16)):
        late = signed(remote, "GET", BASE + path, body, at=datetime.now(UTC) + skew)
        await refused(remote, "GET", path, body, late, "15 minutes")
    # an unknown access key, a wrong secret, another region
    await refused(
        remote,
        "GET",
        path,
        body,
        signed(remote, "GET", BASE + path, body, key="AKIAUNKNOWN0000000000"),
        "unknown access key",
    )
    await refused(remote, "GET", path, body, signed(remote, "GET", BASE + path, body, secret="wrong"), "does not match")
    await refused(remote, "GET", path, body, signed(remote, "GET", BASE + path, body, region="eu-west-1"), "region")
    # another path than the one signed
    await refused(remote, "GET", f"/{cid}/memories/sessions/_search", body, good, "does not match")
    # unsigned, and a session token (temporary credentials cannot be checked here)
    response = await remote.request("GET", BASE + path, data=body, headers={"Content-Type": "application/json"})
    assert response.status == 401 and (await response.json())["error"]["type"] == "security_exception"
    await refused(remote, "GET", path, body, {**good, "X-Amz-Security-Token": "token"}, "session tokens")
    # a signature that leaves out the host
    await refused(
        remote,
        "GET",
        path,
        body,
        {
            **good,
            "Authorization": good["Authorization"].replace(
                "SignedHeaders=content-length;content-type;host;", "SignedHeaders=content-length;content-type;"
            ),
        },
        "host",
    )


async def test_without_sigv4_settings_a_signature_is_refused(aiohttp_client, settings, embedder, alice) -> None:  # type: ignore[no-untyped-def]
    client = await aiohttp_client(create_app(settings, embedder=embedder))
    headers = signed(client, "GET", BASE + "/x/memories/working/_search", b"{}")
    response = await client.request("GET", BASE + "/x/memories/working/_search", data=b"{}", headers=headers)
    assert response.status == 401
    assert "Bearer or Basic" in (await response.json())["error"]["reason"]


async def test_nothing_is_read_of_the_body_before_the_key_and_date_are_known(sigv4_file: Path) -> None:
    """An unknown key, or a stale date, is refused from the headers alone: no one unknown makes us read a body."""
    verifier = SigV4Verifier(sigv4_file, REGION)

    class Client:
        host, port = "127.0.0.1", 9200

    async def never() -> bytes:
        raise AssertionError("the body was read")

    for headers in (
        signed(Client, "POST", BASE + "/c/memories", b"{}", key="AKIAUNKNOWN0000000000"),
        signed(Client, "POST", BASE + "/c/memories", b"{}", at=datetime.now(UTC) - timedelta(hours=1)),
    ):
        lowered = {name.lower(): value for name, value in headers.items()}
        with pytest.raises(Unauthorized):
            await verifier.verify(SignedRequest("POST", BASE + "/c/memories", lowered, never))


def test_the_keys_file_must_be_private_and_well_formed(sigv4_file: Path) -> None:
    assert load_keys(sigv4_file)[ACCESS_KEY].principal.backend_roles == ("agents",)
    sigv4_file.chmod(0o640)
    with pytest.raises(ValueError, match="chmod 600"):
        SigV4Verifier(sigv4_file, REGION)
    sigv4_file.chmod(0o600)
    sigv4_file.write_text(json.dumps({"keys": [{"access_key_id": "A", "organization_id": "org-1"}]}))
    with pytest.raises(ValueError, match="secret_access_key"):
        load_keys(sigv4_file)


def test_sigv4_settings_go_together(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="sigv4_region"):
        load_settings(environ={"MEMORY_PLUGIN_AUTH_SIGV4_KEYS_FILE": str(tmp_path / "k.json")}, data_dir=tmp_path)
    loaded = load_settings(
        environ={
            "MEMORY_PLUGIN_AUTH_SIGV4_KEYS_FILE": str(tmp_path / "k.json"),
            "MEMORY_PLUGIN_AUTH_SIGV4_REGION": REGION,
        },
        data_dir=tmp_path,
    )
    assert loaded.auth.sigv4_region == REGION and loaded.auth.sigv4_keys_file == tmp_path / "k.json"


async def test_retention_takes_what_a_sigv4_agent_wrote_into_a_shared_container(  # type: ignore[no-untyped-def]
    aiohttp_client, remote_settings: Settings, embedder, alice: Caller
) -> None:
    """The owner's retention run covers the agent's sessions too: ml-commons' job filters by container only."""
    settings = remote_settings.replace(agentic={"retention": {"enabled": True}})
    client = await aiohttp_client(create_app(settings, embedder=embedder))

    async def as_alice(path: str, body: dict[str, Any] | None = None) -> Any:
        response = await client.post(BASE + path, json=body, headers=alice.headers)
        assert response.status == 200
        return await response.json()

    policy = {"retention_policy": {"sessions": {"max_count": 1}}}
    created = await as_alice("/_create", {"name": "a", "backend_roles": ["agents"], "configuration": policy})
    cid = created["memory_container_id"]
    for sid in ("s1", "s2"):  # equal times sort by id: s1 is the least recently updated
        message = {"role": "user", "content": [{"type": "text", "text": sid}]}
        status, _ = await send(
            client, "POST", f"/{cid}/memories", {"messages": [message], "namespace": {"session_id": sid}}
        )
        assert status == 200
    report = await as_alice(f"/{cid}/_retention/_dry_run")
    assert report["would_delete"]["sessions"] == {"total": 1, "by_reason": {"retention_days": 0, "max_count": 1}}
    assert (await as_alice("/_retention/_execute"))["status"] == "triggered"
    status, found = await send(client, "POST", f"/{cid}/memories/sessions/_search", {"query": {"match_all": {}}})
    assert status == 200 and [hit["_id"] for hit in found["hits"]["hits"]] == ["s2"]


@pytest.mark.backends("opensearch")
async def test_the_remote_suite_really_runs_on_opensearch(remote) -> None:  # type: ignore[no-untyped-def]
    from memory_plugin.agentic.routes import AGENTIC
    from memory_plugin.agentic.stores.opensearch import OpenSearchAgenticStore

    assert isinstance(remote.app[AGENTIC].store, OpenSearchAgenticStore)
