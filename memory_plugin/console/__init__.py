"""``GET /_console``: a small web page over the public HTTP API.

The page and its two assets load without a key and hold no data: the script
asks for a key, keeps it in the tab's session storage, and calls the same
endpoints a curl user would, with ``Authorization: Bearer``.  A strict
Content-Security-Policy forbids inline script and anything from elsewhere.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from importlib import resources

from aiohttp import web

from memory_plugin.auth import Principal

PATH = "/_console"
#: The files the page is made of: served from the package, nothing else is.
ASSETS = {"console.js": "text/javascript", "console.css": "text/css"}
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-cache",
}


def _read(name: str) -> bytes:
    return resources.files(__package__).joinpath(name).read_bytes()


async def page(request: web.Request) -> web.Response:
    return web.Response(body=_read("index.html"), content_type="text/html", charset="utf-8", headers=HEADERS)


async def asset(request: web.Request) -> web.Response:
    name = request.match_info["asset"]
    if name not in ASSETS:
        raise web.HTTPNotFound()  # answered like any unknown path, in the API's format
    return web.Response(body=_read(name), content_type=ASSETS[name], charset="utf-8", headers=HEADERS)


#: ``whoami``'s answer is the caller's principal, which the front door put on the request.
PrincipalOf = Callable[[web.Request], Principal]


def whoami(principal_of: PrincipalOf) -> Callable[[web.Request], Awaitable[web.Response]]:
    """``GET PATH/whoami`` (a key needed): who the key is, so the page can tell the caller's own agentic
    containers from those shared with it through its roles (a container shows its owner's name)."""

    async def answer(request: web.Request) -> web.Response:
        caller = principal_of(request)
        return web.json_response(
            {
                "organization_id": caller.organization_id,
                "user_id": caller.user_id,
                "backend_roles": list(caller.backend_roles),
            },
            headers=HEADERS,
        )

    return answer


def app(principal_of: PrincipalOf) -> web.Application:
    """The console as a sub-app, mounted at ``PATH``: the page at ``PATH`` itself, its assets below."""
    console = web.Application()
    console.router.add_get("", page)
    console.router.add_get("/whoami", whoami(principal_of))
    console.router.add_get("/{asset}", asset)
    return console


#: Handlers that answer without a credential (they serve only the page's own files).
PUBLIC = (page, asset)
