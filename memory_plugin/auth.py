"""API keys: who is calling.

A key is ``<key_id>.<secret>``.  The keys file stores the id, the owner and
a SHA-256 of the secret, never the secret.  Secrets are 32 random bytes, so
a fast hash is as safe as a slow one here, and it keeps per-request
checking cheap.  Comparison is constant-time.

Clients that only speak HTTP Basic (``http_auth=(user, password)`` in
opensearch-py) send the key id as the user and the secret as the password.

Keys live in one of two stores behind one interface (``KeyBackend``): a local
file (``KeyStore``, the default: one host) or an OpenSearch index
(``auth_opensearch``: every process on every host reads the same keys).
Administration is synchronous (the CLI and scripts call it); the server's
checks are asynchronous and read a snapshot of every key that is never older
than ``MAX_AGE`` seconds, so a revocation anywhere is refused everywhere
within that bound, without a store round trip per request.  A credential the
snapshot refuses is checked once more against a fresh read (at most every
``REREAD_REFUSED_AFTER`` seconds), so a key made beside the server works at once.
"""

from __future__ import annotations

import abc
import asyncio
import base64
import binascii
import fcntl
import hashlib
import hmac
import json
import logging
import os
import re
import secrets
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memory_plugin.dates import isoformat
from memory_plugin.errors import Unauthorized, Unavailable, java_is_blank
from memory_plugin.files import make_private_dir, open_private

log = logging.getLogger("memory_plugin")


@dataclass(frozen=True, slots=True)
class Principal:
    """The caller: an organisation, and optionally a user within it, with the backend roles its key holds.

    A key without a user speaks for the whole organisation (ml-commons' ``all_access`` within it); the
    roles open the containers created with ``backend_roles`` naming one of them (same organisation only).
    """

    organization_id: str
    user_id: str | None = None
    backend_roles: tuple[str, ...] = field(default=(), compare=False)

    @property
    def organization_admin(self) -> bool:
        return self.user_id is None


@dataclass(frozen=True, slots=True)
class KeyEntry:
    key_id: str
    secret_sha256: str
    organization_id: str
    user_id: str | None
    created_at: str
    revoked: bool = False
    #: Absent from keys made before roles existed: those keys hold none.
    backend_roles: tuple[str, ...] = ()

    @property
    def principal(self) -> Principal:
        return Principal(self.organization_id, self.user_id, self.backend_roles)

    @classmethod
    def from_stored(cls, raw: Mapping[str, Any]) -> KeyEntry:
        """An entry as the keys file or index holds it (roles as a JSON list, or not at all)."""
        return cls(**{**raw, "backend_roles": tuple(raw.get("backend_roles") or ())})


def _check_name(what: str, name: str) -> None:
    if not name.strip() or not name.isprintable():
        raise ValueError(f"the {what} id must be a non-empty printable name, not {name!r}")


#: A backend role's characters (``MLCreateMemoryContainerInput.validateBackendRoles``:
#: ``[\p{L}\p{N}:+=,.@\-_/]+``); Python's ``\w`` is the Unicode letters and digits, and ``_``.
_BACKEND_ROLE_CHARS = re.compile(r"[\w:+=,.@/-]+")
#: ml-commons' limit, in Java chars (UTF-16 code units).
BACKEND_ROLE_MAX_LENGTH = 128


def backend_role_error(role: str) -> str | None:
    """Why ml-commons refuses ``role`` as a backend role, in its order and words; None when it is valid.
    Containers, API keys and SigV4 keys all take roles by this one rule, so a role a container names can be
    held by a key."""
    if java_is_blank(role):
        return "Backend role cannot be empty or blank"
    if len(role.encode("utf-16-le", "surrogatepass")) // 2 > BACKEND_ROLE_MAX_LENGTH:
        return f"Backend role exceeds maximum length of {BACKEND_ROLE_MAX_LENGTH} characters: {role}"
    if not _BACKEND_ROLE_CHARS.fullmatch(role):
        return (
            f"Backend role contains invalid characters. Only alphanumeric characters and :+=,.@-_/ are allowed: {role}"
        )
    return None


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def new_key(
    organization_id: str, user_id: str | None = None, backend_roles: Sequence[str] = ()
) -> tuple[KeyEntry, str]:
    """A fresh key's entry (what is stored) and its full token (shown once, never stored).

    An empty organisation or user would read as "no user", an
    organisation-wide key: both must be real names.  Roles follow ml-commons'
    rule for ``backend_roles`` (what a container may name).
    """
    _check_name("organization", organization_id)
    if user_id is not None:
        _check_name("user", user_id)
    for role in backend_roles:
        refusal = backend_role_error(role)
        if refusal is not None:
            raise ValueError(refusal)
    key_id = "key_" + secrets.token_hex(8)
    secret = secrets.token_urlsafe(32)
    entry = KeyEntry(
        key_id=key_id,
        secret_sha256=_digest(secret),
        organization_id=organization_id,
        user_id=user_id,
        created_at=isoformat(datetime.now(UTC)),
        backend_roles=tuple(dict.fromkeys(backend_roles)),
    )
    return entry, f"{key_id}.{secret}"


#: At most this many verified credentials are remembered; past it the memory starts afresh.
MAX_VERIFIED = 4096
#: Seconds a snapshot of the keys answers for, counted from the moment its read began: a key
#: revoked through any process or the CLI is refused by every process at most this long after
#: the revocation is acknowledged.  Past it a request waits for a fresh read (one for all).
MAX_AGE = 1.0
#: Past this age a request still answers from the snapshot but starts a fresh read in the
#: background, so that under steady traffic no request waits for the store.
REFRESH_AFTER = 0.5
#: A credential the snapshot refuses makes a fresh read first when the snapshot's read began at least
#: this long ago: a key made beside the server (``keys create``) works at once, and a caller sending
#: bad keys costs the store at most one read per this many seconds.
REREAD_REFUSED_AFTER = 0.1


class KeyBackend(abc.ABC):
    """Where keys live, and the checking every store shares.

    A credential that passed the check is remembered under the SHA-256 of the
    whole ``Authorization`` value (never the value itself), so that the next
    request with it skips parsing and checking; the memory is dropped whenever
    the keys change, so a revoked key fails as soon as a fresh snapshot is read.
    """

    #: Where the keys are, for messages.
    where: str = ""

    def __init__(self) -> None:
        self._entries: Mapping[str, KeyEntry] = {}
        #: When the current snapshot's read began (monotonic); 0 forces a read on the next check.
        self._checked_at = 0.0
        self._verified: dict[bytes, Principal] = {}
        self._reading: asyncio.Task[None] | None = None

    # -- administration: synchronous, for the CLI and scripts ----------------

    @abc.abstractmethod
    def create(
        self, organization_id: str, user_id: str | None = None, backend_roles: Sequence[str] = ()
    ) -> tuple[KeyEntry, str]:
        """Add a key and return it with its full token, which is shown only now."""

    @abc.abstractmethod
    def revoke(self, key_id: str) -> bool:
        """Mark a key revoked; False if there is no such key."""

    @abc.abstractmethod
    def entries(self) -> list[KeyEntry]: ...

    # -- what the server reads: asynchronous ---------------------------------

    @abc.abstractmethod
    async def read(self) -> Mapping[str, KeyEntry]:
        """Every key, as stored now; the same mapping object while nothing changed, where cheap to tell."""

    async def open(self) -> None:
        """Read the keys once, so that a server whose keys cannot be read fails at start.  The first
        request reads them again, as before this snapshot existed: a key made between the start and the
        first request (an operator's first key, a test's) is accepted at once."""
        await self._read_now()
        self._checked_at = 0.0

    async def close(self) -> None:
        reading, self._reading = self._reading, None
        if reading is not None:
            reading.cancel()
            with suppress(asyncio.CancelledError, Exception):
                await reading

    async def _read_now(self) -> None:
        started = time.monotonic()
        entries = await self.read()
        if entries is not self._entries and entries != self._entries:
            self._entries, self._verified = entries, {}
        self._checked_at = started

    def _fresh_read(self) -> asyncio.Task[None]:
        """The read in flight, or a new one: concurrent requests share one read (a single flight)."""
        if self._reading is None or self._reading.done():
            self._reading = asyncio.ensure_future(self._read_now())
            self._reading.add_done_callback(_log_failed_read)
        return self._reading

    # -- checking -------------------------------------------------------------

    async def authenticate(self, authorization: str | None) -> Principal:
        """The principal named by an ``Authorization`` header value."""
        if not authorization:
            raise Unauthorized("missing authentication credentials")
        if not authorization.isascii():  # keys are ASCII; other bytes arrive as surrogate escapes
            raise Unauthorized("malformed credentials")
        age = time.monotonic() - self._checked_at
        if age >= REFRESH_AFTER:
            reading = self._fresh_read()
            if age >= MAX_AGE:
                try:
                    await asyncio.shield(reading)
                except Exception as error:  # fail closed: a snapshot past the bound may hold a revoked key
                    raise Unavailable(f"the API keys cannot be read ({self.where}): {error}") from None
        digest = hashlib.sha256(authorization.encode()).digest()
        principal = self._verified.get(digest)
        if principal is None:
            try:
                principal = self._check(authorization)
            except Unauthorized:
                if time.monotonic() - self._checked_at < REREAD_REFUSED_AFTER:
                    raise
                try:
                    await asyncio.shield(self._fresh_read())
                except Exception as error:
                    raise Unavailable(f"the API keys cannot be read ({self.where}): {error}") from None
                principal = self._check(authorization)
            if len(self._verified) >= MAX_VERIFIED:
                self._verified = {}
            self._verified[digest] = principal
        return principal

    def verify(self, key_id: str, secret: str) -> Principal:
        """Check a key against the current snapshot."""
        entry = self._entries.get(key_id)
        # Hash even for unknown ids, so that timing does not tell ids apart.
        expected = entry.secret_sha256 if entry else _digest("")
        matches = hmac.compare_digest(_digest(secret), expected)
        if entry is None or not matches:
            raise Unauthorized("invalid credentials")
        if entry.revoked:
            raise Unauthorized("the API key has been revoked")
        return entry.principal

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


def _log_failed_read(reading: asyncio.Task[None]) -> None:
    if not reading.cancelled() and reading.exception() is not None:
        log.warning("reading the API keys failed: %s", reading.exception())


class KeyStore(KeyBackend):
    """The keys file (the default store): one host.  Several processes on that host share it, each
    re-reading it when it changes (a ``stat`` per snapshot); more than one host needs the
    ``opensearch`` store (setting ``[auth] keys_backend``), since a file reaches other hosts only through a
    shared disk."""

    def __init__(self, path: Path | str) -> None:
        super().__init__()
        self.path = Path(path)
        self.where = f"keys file {self.path}"
        #: The file as last read; a new mapping whenever the file changed.
        self._keys: dict[str, KeyEntry] = {}
        self._stamp: tuple[int, int] | None = None

    # -- the file -------------------------------------------------------------

    def load(self) -> None:
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            if self._stamp is not None or self._keys:
                self._keys, self._stamp = {}, None
            return
        stamp = (stat.st_mtime_ns, stat.st_size)
        if stamp == self._stamp:
            return
        document = json.loads(self.path.read_text())
        self._keys = {raw["key_id"]: KeyEntry.from_stored(raw) for raw in document.get("keys", [])}
        self._stamp = stamp

    async def read(self) -> Mapping[str, KeyEntry]:
        self.load()  # a stat, and a small file's read when it changed: no thread needed
        return self._keys

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

    def _save(self, keys: dict[str, KeyEntry]) -> None:
        """Write the whole file anew: a unique 0600 temporary in the same folder, then a rename."""
        document = {"keys": [asdict(entry) for entry in keys.values()]}
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

    def create(
        self, organization_id: str, user_id: str | None = None, backend_roles: Sequence[str] = ()
    ) -> tuple[KeyEntry, str]:
        entry, token = new_key(organization_id, user_id, backend_roles)
        with self._locked():
            self._save({**self._keys, entry.key_id: entry})
        return entry, token

    def revoke(self, key_id: str) -> bool:
        with self._locked():
            entry = self._keys.get(key_id)
            if entry is None:
                return False
            self._save({**self._keys, key_id: KeyEntry.from_stored({**asdict(entry), "revoked": True})})
        return True

    def entries(self) -> list[KeyEntry]:
        self.load()
        return list(self._keys.values())
