"""The smallest aiohttp server: the baseline our own overhead is measured against.

    python scripts/hello_world.py PORT [--uvloop]

As ``web.run_app`` starts it, on asyncio's own loop; ``--uvloop`` runs it on
uvloop, the loop ``memory-plugin serve`` uses, for a like-for-like comparison.
"""

import sys

import uvloop
from aiohttp import web


async def hello(request: web.Request) -> web.Response:
    return web.json_response({"hello": "world"})


async def echo(request: web.Request) -> web.Response:
    return web.json_response({"id": "x" * 20, "size": len(await request.read())})


app = web.Application()
app.router.add_get("/", hello)
app.router.add_post("/", echo)

if __name__ == "__main__":
    loop = uvloop.new_event_loop() if "--uvloop" in sys.argv[2:] else None
    web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None, loop=loop)
