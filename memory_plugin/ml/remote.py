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

import ipaddress
import socket
from collections.abc import Mapping
from dataclasses import dataclass

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from yarl import URL

from memory_plugin.errors import InvalidArgument
from memory_plugin.ml.connectors import Prepared
from memory_plugin.ml.errors import StatusError

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


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes


class RemoteCaller:
    """One HTTP client for every connector call of the process."""

    def __init__(self, *, timeout: float, allow_private: bool) -> None:
        self.timeout = timeout
        self.allow_private = allow_private
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(resolver=None if self.allow_private else PublicOnlyResolver(), limit=64)
            self._session = aiohttp.ClientSession(
                connector=connector, timeout=aiohttp.ClientTimeout(total=self.timeout), trust_env=False
            )
        return self._session

    async def call(self, request: Prepared) -> Answer:
        """The remote answer; messages show the URL with its credentials masked, never as sent."""
        if not self.allow_private and literal_private_host(request.url):  # aiohttp resolves no literal address
            raise InvalidArgument(
                f"Remote inference host name has private ip address: {_host(request.shown_url)}", parameter="url"
            )
        try:
            async with self._client().request(
                request.method,
                without_userinfo(request.url),
                headers={"Content-Type": "application/json", **request.headers},
                data=request.body.encode("utf-8", "surrogatepass") if request.body is not None else None,
                allow_redirects=False,
            ) as response:
                body = await response.content.read(MAX_ANSWER_BYTES + 1)
                if len(body) > MAX_ANSWER_BYTES:
                    raise StatusError(f"the remote model answered more than {MAX_ANSWER_BYTES} bytes", 502)
                return Answer(response.status, body)
        except PrivateAddress:
            raise InvalidArgument(
                f"Remote inference host name has private ip address: {_host(request.shown_url)}", parameter="url"
            ) from None
        except TimeoutError:
            raise StatusError(f"the remote model did not answer within {self.timeout:g} s", 504) from None
        except (aiohttp.InvalidURL, ValueError):
            raise InvalidArgument(
                f"the connector's URL is not a valid URL: {request.shown_url}", parameter="url"
            ) from None
        except aiohttp.ClientError as error:
            raise StatusError(f"Error communicating with remote model: {type(error).__name__}", 502) from None

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
    """ml-commons passes a remote service's error status through, with its body."""
    if 200 <= answer.status < 300:
        return None
    status = answer.status if 400 <= answer.status < 600 else 502
    return StatusError("Error from remote service: " + answer.body[:2000].decode("utf-8", "replace"), status)


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
    return Prepared(request.method, request.url, dict(aws.headers.items()), request.body, request.shown_url)
