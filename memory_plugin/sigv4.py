"""AWS Signature Version 4 on incoming requests: how ml-commons' remote agentic memory calls us.

ml-commons (3.5+, ``RemoteAgenticConversationMemory``) signs its calls with the AWS SDK's
``AwsV4HttpSigner`` when an agent's memory names a ``region`` and a ``credential`` (access key,
secret key), service ``aoss`` (or ``es`` for ``*.es.amazonaws.com`` endpoints).  We check such a
request by signing it again with botocore's ``SigV4Auth`` (the reference implementation in Python)
over what we received and comparing the signatures in constant time; around that we enforce
what botocore leaves to the server: the credential scope (date, our region, service, terminator), a
time window (AWS's: 15 minutes either way), ``host`` and ``x-amz-date`` among the signed headers, and
a body whose SHA-256 is the one signed (``x-amz-content-sha256``, when sent, must be that hash and
signed; ``UNSIGNED-PAYLOAD`` is refused).

The operator names the access keys in a JSON file (setting ``[auth] sigv4_keys_file``), each with the
principal it speaks for.  SigV4 is an HMAC over the request keyed by the secret itself, so the server
must hold the secret: unlike API keys, these cannot be stored hashed.  The file must therefore be
readable by its owner only (``chmod 600``), or the server refuses to start.  Session tokens (temporary
STS credentials) cannot be checked without AWS and are refused.
"""

from __future__ import annotations

import hmac
import json
import os
import re
import stat
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from hashlib import sha256
from pathlib import Path

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from memory_plugin.auth import Principal, backend_role_error
from memory_plugin.errors import Unauthorized

SCHEME = "AWS4-HMAC-SHA256"
#: The services ml-commons signs for (``extractServiceName``): ``aoss`` by default, ``es`` for managed domains.
SERVICES = ("aoss", "es")
#: How far a request's ``x-amz-date`` may be from our clock, either way: AWS's own window.
MAX_SKEW = timedelta(minutes=15)
_AUTHORIZATION = re.compile(
    r"AWS4-HMAC-SHA256 +Credential=(?P<credential>[^,\s]+), *SignedHeaders=(?P<signed>[a-z0-9;_.-]+), *"
    r"Signature=(?P<signature>[0-9a-f]{64})"
)
_AMZ_DATE = "%Y%m%dT%H%M%SZ"


@dataclass(frozen=True)
class SigV4Key:
    access_key_id: str
    secret_access_key: str
    principal: Principal


@dataclass(frozen=True)
class SignedRequest:
    """What was received, as the signature covers it: the path and query exactly as sent (still encoded)."""

    method: str
    raw_path: str
    headers: Mapping[str, str]  # lowercase names; repeated headers joined with ","
    #: Reads the body: only once the headers passed every cheap check, so that no one unknown makes us
    #: read (up to ``max_body_bytes``) before being refused.
    read_body: Callable[[], Awaitable[bytes]]


def load_keys(path: Path) -> dict[str, SigV4Key]:
    """The keys file: ``{"keys": [{"access_key_id", "secret_access_key", "organization_id", "user_id"?,
    "backend_roles"?}]}``, readable by its owner only."""
    mode = path.stat().st_mode
    if stat.S_IMODE(mode) & 0o077:
        raise ValueError(
            f"the SigV4 keys file {path} holds secrets and must be readable by its owner only (chmod 600), "
            f"not {stat.S_IMODE(mode):o}"
        )
    document = json.loads(path.read_text())
    keys: dict[str, SigV4Key] = {}
    for raw in document.get("keys", []):
        key_id, secret, organization = (
            raw.get("access_key_id"),
            raw.get("secret_access_key"),
            raw.get("organization_id"),
        )
        user, roles = raw.get("user_id"), raw.get("backend_roles") or []
        if not all(isinstance(value, str) and value for value in (key_id, secret, organization)):
            raise ValueError(f"{path}: each key needs access_key_id, secret_access_key and organization_id")
        if user is not None and not (isinstance(user, str) and user):
            raise ValueError(f"{path}: user_id of {key_id} must be a non-empty string or absent")
        if not isinstance(roles, list) or not all(isinstance(r, str) and backend_role_error(r) is None for r in roles):
            raise ValueError(f"{path}: backend_roles of {key_id} must be a list of backend role names")
        if key_id in keys:
            raise ValueError(f"{path}: access key {key_id} is listed twice")
        keys[key_id] = SigV4Key(key_id, secret, Principal(organization, user, tuple(roles)))
    return keys


class SigV4Verifier:
    """Checks SigV4-signed requests against the operator's keys file, re-read whenever it changes."""

    def __init__(self, path: Path, region: str) -> None:
        self.path = path
        self.region = region
        self._stamp: tuple[int, int, int] | None = None
        self._keys: dict[str, SigV4Key] = {}
        self._reload()

    def _reload(self) -> None:
        """A ``stat`` per request; the file is read again only when it changed (keys added or rotated)."""
        status = os.stat(self.path)
        stamp = (status.st_mtime_ns, status.st_size, status.st_ino)
        if stamp != self._stamp:
            self._keys, self._stamp = load_keys(self.path), stamp

    async def verify(self, request: SignedRequest, now: datetime | None = None) -> Principal:
        """The principal of a correctly signed request; ``Unauthorized`` naming what is wrong otherwise."""
        self._reload()
        headers = request.headers
        match = _AUTHORIZATION.fullmatch(headers.get("authorization", "").strip())
        if match is None:
            raise Unauthorized("malformed AWS4-HMAC-SHA256 authorization")
        key_id, _, scope = match["credential"].partition("/")
        key = self._keys.get(key_id)
        amz_date = headers.get("x-amz-date", "")
        try:
            signed_at = datetime.strptime(amz_date, _AMZ_DATE).replace(tzinfo=UTC)
        except ValueError:
            raise Unauthorized("a SigV4 request needs an x-amz-date header (YYYYMMDD'T'HHMMSS'Z')") from None
        date, _, rest = scope.partition("/")
        region, _, rest = rest.partition("/")
        service, _, terminator = rest.partition("/")
        if date != amz_date[:8] or terminator != "aws4_request" or service not in SERVICES:
            raise Unauthorized(
                f"the SigV4 credential scope {scope!r} is not {amz_date[:8]}/<region>/aoss|es/aws4_request"
            )
        if region != self.region:
            raise Unauthorized(f"the SigV4 credential scope names region {region!r}; this server is {self.region!r}")
        if abs((now or datetime.now(UTC)) - signed_at) > MAX_SKEW:
            raise Unauthorized(
                "the SigV4 signature has expired or is not yet valid: x-amz-date is over 15 minutes away"
            )
        signed = match["signed"].split(";")
        for needed in ("host", "x-amz-date"):
            if needed not in signed:
                raise Unauthorized(f"the SigV4 signature must cover the {needed} header")
        if "x-amz-security-token" in headers:
            raise Unauthorized("SigV4 session tokens (temporary credentials) are not accepted: use an access key")
        missing = [name for name in signed if name not in headers]
        if missing:
            raise Unauthorized(f"signed headers missing from the request: {', '.join(missing)}")
        if key is None:  # access key ids are not secret (AWS names an unknown one too): refuse before the body
            raise Unauthorized("the SigV4 signature does not match (unknown access key)")
        body = await request.read_body()
        declared = headers.get("x-amz-content-sha256")
        if declared is not None and ("x-amz-content-sha256" not in signed or declared != sha256(body).hexdigest()):
            raise Unauthorized("x-amz-content-sha256 must be signed and be the SHA-256 of the body")
        # Sign again, as the client did, over exactly the headers it signed.
        aws = AWSRequest(
            method=request.method,
            url=f"http://{headers['host']}{request.raw_path}",
            headers={name: headers[name] for name in signed},
            data=body,
        )
        aws.context["timestamp"] = amz_date
        signer = SigV4Auth(Credentials(key_id, key.secret_access_key), service, region)
        if signer.signed_headers(signer.headers_to_sign(aws)) != match["signed"]:
            raise Unauthorized("the SigV4 signed headers must be sorted, lowercase, and not hop-by-hop")
        expected = signer.signature(signer.string_to_sign(aws, signer.canonical_request(aws)), aws)
        if not hmac.compare_digest(expected, match["signature"]):
            raise Unauthorized("the SigV4 signature does not match (wrong secret, or the request was altered)")
        return key.principal
