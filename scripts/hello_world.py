"""The smallest aiohttp server: the baseline our own overhead is measured against."""

import sys

from aiohttp import web


async def hello(request: web.Request) -> web.Response:
    return web.json_response({"hello": "world"})


async def echo(request: web.Request) -> web.Response:
    return web.json_response({"id": "x" * 20, "size": len(await request.read())})


app = web.Application()
app.router.add_get("/", hello)
app.router.add_post("/", echo)

if __name__ == "__main__":
    web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None)
