"""Calls to remote models, bounded and kept off private networks.

A connector's URL is checked against the trusted patterns when it is saved and
again when it is called (parameters given at predict time may change it).  The
address a host name resolves to is checked when the connection is made, so a
public name that resolves to a loopback, private or link-local address (a DNS
rebinding) is refused as ml-commons refuses it; redirects are not followed.  A
call has one deadline from connecting to its last byte, and an answer larger
than ``MAX_ANSWER_BYTES`` is refused, so a hanging or flooding endpoint costs a
bounded wait and bounded memory.
"""

from __future__ import annotations

import asyncio
import ipaddress
import itertools
import random
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from yarl import URL

from memory_plugin.errors import InvalidArgument, StatusError
from memory_plugin.ml.connector_requests import ClientConfig
from memory_plugin.ml.connectors import Prepared

#: The most bytes read from one remote answer.
MAX_ANSWER_BYTES = 16 * 1024 * 1024


def private(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return not ip.is_global or ip.is_multicast


class PrivateAddress(aiohttp.ClientConnectionError):
    def __init__(self, host: str) -> None:
        super().__init__(f"Remote inference host name has private ip address: {host}")
        self.host = host


class PublicOnlyResolver(AbstractResolver):
    """The default resolver, refusing any host that resolves to a non-public address."""

    def __init__(self) -> None:
        self._inner = DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        results = await self._inner.resolve(host, port, family)
        if any(private(result["host"]) for result in results):
            raise PrivateAddress(host)
        return results

    async def close(self) -> None:
        await self._inner.close()


#: The header AWS services name their error in; ``ThrottlingException...`` there is ml-commons' retryable case.
AMZ_ERROR_HEADER = "x-amzn-ErrorType"


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes
    #: The values of ``x-amzn-ErrorType``.
    error_types: tuple[str, ...] = ()


class RemoteFailure(StatusError):
    """A failure ml-commons retries (``RetryableActionExtension.isRetryable``): the remote's throttling, a 429
    or 5xx answer, or no answer at all (which ml-commons reports as a 500)."""


class DeadlinePassed(StatusError):
    """The call's deadline passed during an attempt."""


class Slots:
    """At most so many calls at once per connector, in this process (ml-commons' pool per connector and node)."""

    def __init__(self) -> None:
        self._held: dict[str, tuple[asyncio.Semaphore, int]] = {}

    @asynccontextmanager
    async def hold(self, key: str, most: int) -> AsyncIterator[None]:
        semaphore, users = self._held.get(key, (asyncio.Semaphore(most), 0))
        self._held[key] = (semaphore, users + 1)
        try:
            async with semaphore:
                yield
        finally:
            semaphore, users = self._held[key]
            if users > 1:
                self._held[key] = (semaphore, users - 1)
            else:
                del self._held[key]


class RemoteCaller:
    """One HTTP client for every connector call of the process."""

    def __init__(self, *, timeout: float, allow_private: bool) -> None:
        self.timeout = timeout
        self.allow_private = allow_private
        self._session: aiohttp.ClientSession | None = None
        self._slots = Slots()

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(resolver=None if self.allow_private else PublicOnlyResolver(), limit=64)
            self._session = aiohttp.ClientSession(connector=connector, trust_env=False)
        return self._session

    async def call(self, request: Prepared, config: ClientConfig, deadline: float, slot: str) -> Answer:
        """One attempt: the remote answer, within ``config``'s timeouts and the call's ``deadline`` (a loop
        time), at most ``config.max_connection`` at once through the connector ``slot`` (ml-commons' client
        pool of each connector); messages show the URL with its credentials masked, never as sent."""
        if not self.allow_private and literal_private_host(request.url):  # aiohttp resolves no literal address
            raise InvalidArgument(
                f"Remote inference host name has private ip address: {_host(request.shown_url)}", parameter="url"
            )
        try:
            async with asyncio.timeout_at(deadline), self._slots.hold(slot, config.max_connection):
                return await self._send(request, config)
        except PrivateAddress:
            raise InvalidArgument(
                f"Remote inference host name has private ip address: {_host(request.shown_url)}", parameter="url"
            ) from None
        except aiohttp.ConnectionTimeoutError:
            raise RemoteFailure("Error communicating with remote model: connection timed out", 504) from None
        except aiohttp.SocketTimeoutError:
            raise RemoteFailure("Error communicating with remote model: Read timed out", 504) from None
        except TimeoutError:
            raise DeadlinePassed(f"the remote model did not answer within {self.timeout:g} s", 504) from None
        except (aiohttp.InvalidURL, ValueError):
            raise InvalidArgument(
                f"the connector's URL is not a valid URL: {request.shown_url}", parameter="url"
            ) from None
        except aiohttp.ClientError as error:
            raise RemoteFailure(f"Error communicating with remote model: {type(error).__name__}", 502) from None

    async def _send(self, request: Prepared, config: ClientConfig) -> Answer:
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=config.connection_timeout or None, sock_read=config.read_timeout or None
        )
        async with self._client().request(
            request.method,
            without_userinfo(request.url),
            headers={"Content-Type": "application/json", **request.headers},
            data=request.body.encode("utf-8", "surrogatepass") if request.body is not None else None,
            allow_redirects=False,
            timeout=timeout,
        ) as response:
            body = await response.content.read(MAX_ANSWER_BYTES + 1)
            if len(body) > MAX_ANSWER_BYTES:
                raise StatusError(f"the remote model answered more than {MAX_ANSWER_BYTES} bytes", 502)
            return Answer(response.status, body, tuple(response.headers.getall(AMZ_ERROR_HEADER, ())))

    async def close(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()


def without_userinfo(url: str) -> str | URL:
    """The URL as ml-commons' HTTP client sends it: a ``user:password@`` part is dropped (the AWS SDK's
    request keeps only scheme, host, port, path and query), so it never becomes a second Authorization."""
    try:
        parsed = URL(url)
    except ValueError:
        return url  # aiohttp refuses it: InvalidURL
    return parsed.with_user(None) if parsed.user is not None or parsed.password is not None else url


def _host(url: str) -> str:
    try:
        return URL(url).host or ""
    except ValueError:
        return ""


def literal_private_host(url: str) -> bool:
    """A URL whose host is a literal private address: refused before any connection (no resolver sees it)."""
    try:
        return private(_host(url).strip("[]"))
    except ValueError:
        return False


def error_of(answer: Answer) -> StatusError | None:
    """ml-commons passes a remote service's error status through, with its body; an AWS throttling header
    gets its own words (``MLSdkAsyncHttpResponseHandler.handleThrottlingInHeader``)."""
    if 200 <= answer.status < 300:
        return None
    status = answer.status if 400 <= answer.status < 600 else 502
    if any(kind.startswith("ThrottlingException") for kind in answer.error_types):
        return RemoteFailure(
            "Error from remote service: The request was denied due to remote server throttling. "
            "To change the retry policy and behavior, please update the connector client_config.",
            status,
        )
    reason = "Error from remote service: " + answer.body[:2000].decode("utf-8", "replace")
    return RemoteFailure(reason, status) if status == 429 or status >= 500 else StatusError(reason, status)


async def with_retries(
    attempt: Callable[[], Awaitable[Answer]],
    config: ClientConfig,
    deadline: float,
    *,
    jitter: random.Random | None = None,
) -> Answer:
    """``invokeRemoteServiceWithRetry``: a failure ml-commons retries is tried again after the backoff of
    ``config.retry_backoff_policy``, at most ``max_retry_times`` times (-1: no count), none once
    ``retry_timeout_seconds`` have passed and none that would start past the call's ``deadline`` (a loop
    time); then the last failure is the answer."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    delays = backoff_delays(config, jitter or random.Random())
    retries = 0
    while True:
        try:
            answer = await attempt()
        except RemoteFailure as failure:
            last: StatusError = failure
        except DeadlinePassed:
            if retries:  # a retry the deadline cut short: the failure it retried is the answer
                raise last from None
            raise
        else:
            refused = error_of(answer)
            if refused is None:
                return answer
            last = refused
        retries += 1
        if not isinstance(last, RemoteFailure) or (config.max_retry_times != -1 and retries > config.max_retry_times):
            raise last
        delay = next(delays) / 1000
        now = loop.time()
        if now - started >= config.retry_timeout_seconds or now + delay >= deadline:
            raise last
        await asyncio.sleep(delay)


def backoff_delays(config: ClientConfig, jitter: random.Random) -> Iterator[int]:
    """OpenSearch's ``BackoffPolicy`` iterators, in milliseconds: constant; exponential with equal jitter,
    capped at ``retry_timeout_seconds``; exponential with full jitter."""
    base = config.retry_backoff_millis
    for attempt in itertools.count():
        grown = (1 << min(attempt, 30)) * base
        if config.retry_backoff_policy == "exponential_equal_jitter":
            delay = min(grown, config.retry_timeout_seconds * 1000)
            yield delay // 2 + jitter.randint(0, delay // 2)
        elif config.retry_backoff_policy == "exponential_full_jitter":
            yield jitter.randint(1, max(grown, 1))
        else:
            yield base


def signed_v4(request: Prepared, credential: Mapping[str, str], parameters: Mapping[str, str]) -> Prepared:
    """An ``aws_sigv4`` connector's request, signed by botocore's SigV4 as ml-commons' ``AwsConnector`` signs it:
    the keys (and ``session_token``) from the credential, ``region`` and ``service_name`` from the credential
    or the connector's parameters."""
    region = credential.get("region") or parameters.get("region")
    service = credential.get("service_name") or parameters.get("service_name")
    if not region or not service:
        raise InvalidArgument("an aws_sigv4 connector needs region and service_name", parameter="parameters")
    body = request.body.encode("utf-8", "surrogatepass") if request.body is not None else b""
    aws = AWSRequest(
        method=request.method,
        url=request.url,
        data=body,
        headers={"Content-Type": "application/json", **request.headers},
    )
    keys = Credentials(credential["access_key"], credential["secret_key"], credential.get("session_token"))
    SigV4Auth(keys, service, region).add_auth(aws)
    return Prepared(
        request.method, request.url, dict(aws.headers.items()), request.body, request.shown_url, request.guarded
    )
