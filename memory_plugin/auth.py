"""API keys: who is calling.

A key is ``<key_id>.<secret>``.  The keys file stores the id, the owner and
a SHA-256 of the secret, never the secret.  Secrets are 32 random bytes, so
a fast hash is as safe as a slow one here, and it keeps per-request
checking cheap.  Comparison is constant-time.

Clients that only speak HTTP Basic (``http_auth=(user, password)`` in
opensearch-py) send the key id as the user and the secret as the password.
"""

from __future__ import annotations

import base64
import binascii
import fcntl
import hashlib
import hmac
import json
import os
import secrets
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from memory_plugin.dates import isoformat
from memory_plugin.errors import Unauthorized
from memory_plugin.files import make_private_dir, open_private


@dataclass(frozen=True, slots=True)
class Principal:
    """The caller: an organisation, and optionally a user within it."""

    organization_id: str
    user_id: str | None = None


@dataclass(frozen=True, slots=True)
class KeyEntry:
    key_id: str
    secret_sha256: str
    organization_id: str
    user_id: str | None
    created_at: str
    revoked: bool = False

    @property
    def principal(self) -> Principal:
        return Principal(self.organization_id, self.user_id)


def _check_name(what: str, name: str) -> None:
    if not name.strip() or not name.isprintable():
        raise ValueError(f"the {what} id must be a non-empty printable name, not {name!r}")


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


#: At most this many verified credentials are remembered; past it the memory starts afresh.
MAX_VERIFIED = 4096


class KeyStore:
    """The keys file, re-read when it changes so that revocation takes effect.

    A credential that passed the check is remembered under the SHA-256 of the
    whole ``Authorization`` value (never the value itself), so that the next
    request with it skips parsing and checking; the memory is dropped whenever
    the file changes, so a revoked key fails as soon as the file is re-read.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._entries: dict[str, KeyEntry] = {}
        self._stamp: tuple[int, int] | None = None
        self._checked_at = 0.0
        self._verified: dict[bytes, Principal] = {}

    # -- the file -------------------------------------------------------------

    def load(self) -> None:
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            self._entries, self._stamp, self._verified = {}, None, {}
            return
        stamp = (stat.st_mtime_ns, stat.st_size)
        if stamp == self._stamp:
            return
        document = json.loads(self.path.read_text())
        self._entries = {raw["key_id"]: KeyEntry(**raw) for raw in document.get("keys", [])}
        self._stamp = stamp
        self._verified = {}

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the keys file's lock (``keys.json.lock``) and read the file afresh.

        Several ``keys create`` at once would otherwise each read the same
        file and the last one to write would drop the others' keys.
        """
        make_private_dir(self.path.parent)
        with os.fdopen(open_private(self.path.with_name(self.path.name + ".lock"), os.O_RDWR), "r+b") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                self._stamp = None
                self.load()
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _save(self) -> None:
        """Write the whole file anew: a unique 0600 temporary in the same folder, then a rename."""
        document = {"keys": [asdict(entry) for entry in self._entries.values()]}
        descriptor, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=self.path.name + ".", suffix=".tmp")
        try:
            with os.fdopen(descriptor, "w") as handle:
                json.dump(document, handle, indent=2)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, self.path)
        except BaseException:
            with suppress(OSError):
                os.unlink(temporary)
            raise
        self._stamp = None
        self.load()

    def exists(self) -> bool:
        return self.path.exists()

    # -- administration -------------------------------------------------------

    def create(self, organization_id: str, user_id: str | None = None) -> tuple[KeyEntry, str]:
        """Add a key and return it with its full token, which is shown only now.

        An empty organisation or user would read as "no user", an
        organisation-wide key: both must be real names.
        """
        _check_name("organization", organization_id)
        if user_id is not None:
            _check_name("user", user_id)
        key_id = "key_" + secrets.token_hex(8)
        secret = secrets.token_urlsafe(32)
        entry = KeyEntry(
            key_id=key_id,
            secret_sha256=_digest(secret),
            organization_id=organization_id,
            user_id=user_id,
            created_at=isoformat(datetime.now(UTC)),
        )
        with self._locked():
            self._entries[key_id] = entry
            self._save()
        return entry, f"{key_id}.{secret}"

    def revoke(self, key_id: str) -> bool:
        with self._locked():
            entry = self._entries.get(key_id)
            if entry is None:
                return False
            self._entries[key_id] = KeyEntry(**{**asdict(entry), "revoked": True})
            self._save()
        return True

    def entries(self) -> list[KeyEntry]:
        self.load()
        return list(self._entries.values())

    # -- checking -------------------------------------------------------------

    def _refresh(self) -> None:
        now = time.monotonic()
        if now - self._checked_at >= 1.0:
            self._checked_at = now
            self.load()

    def verify(self, key_id: str, secret: str) -> Principal:
        self._refresh()
        entry = self._entries.get(key_id)
        # Hash even for unknown ids, so that timing does not tell ids apart.
        expected = entry.secret_sha256 if entry else _digest("")
        matches = hmac.compare_digest(_digest(secret), expected)
        if entry is None or not matches:
            raise Unauthorized("invalid credentials")
        if entry.revoked:
            raise Unauthorized("the API key has been revoked")
        return entry.principal

    def authenticate(self, authorization: str | None) -> Principal:
        """The principal named by an ``Authorization`` header value."""
        if not authorization:
            raise Unauthorized("missing authentication credentials")
        if not authorization.isascii():  # keys are ASCII; other bytes arrive as surrogate escapes
            raise Unauthorized("malformed credentials")
        self._refresh()
        digest = hashlib.sha256(authorization.encode()).digest()
        principal = self._verified.get(digest)
        if principal is None:
            principal = self._check(authorization)
            if len(self._verified) >= MAX_VERIFIED:
                self._verified = {}
            self._verified[digest] = principal
        return principal

    def _check(self, authorization: str) -> Principal:
        scheme, _, credentials = authorization.strip().partition(" ")
        credentials = credentials.strip()
        if scheme.lower() == "bearer":
            key_id, dot, secret = credentials.partition(".")
        elif scheme.lower() == "basic":
            try:
                decoded = base64.b64decode(credentials, validate=True).decode()
            except (binascii.Error, UnicodeDecodeError):
                raise Unauthorized("malformed basic credentials") from None
            key_id, dot, secret = decoded.partition(":")
            if secret.startswith(key_id + "."):
                secret = secret[len(key_id) + 1 :]
        else:
            raise Unauthorized("unsupported authorization scheme; use Bearer or Basic")
        if not dot or not key_id or not secret:
            raise Unauthorized("malformed credentials")
        return self.verify(key_id, secret)
