"""Mount memory_plugin into an existing aiohttp application, beside its own routes.

python examples/mounted_app.py            # serves on 127.0.0.1:8080, the plugin under /memory
python examples/mounted_app.py --check    # starts, calls both, prints what it found, stops
"""

import asyncio
import sys
import tempfile

from aiohttp import ClientSession, web

from memory_plugin import create_app, load_settings
from memory_plugin.auth import KeyStore


async def status(request: web.Request) -> web.Response:
    return web.json_response({"service": "call-center backend", "ok": True})


def build(data_dir: str) -> web.Application:
    host = web.Application()
    host.router.add_get("/status", status)
    host.add_subapp("/memory", create_app(load_settings(data_dir=data_dir)))
    return host


async def check(data_dir: str) -> None:
    _, key = KeyStore(f"{data_dir}/keys.json").create("acme", "agent-7")
    runner = web.AppRunner(build(data_dir))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    headers = {"Authorization": f"Bearer {key}"}
    try:
        async with ClientSession(f"http://127.0.0.1:{port}") as http:
            print("host route:", await (await http.get("/status")).json())
            created = await (
                await http.post("/memory/_plugins/_ml/memory", json={"name": "mounted"}, headers=headers)
            ).json()
            memory_id = created["memory_id"]
            await http.post(
                f"/memory/_plugins/_ml/memory/{memory_id}/messages",
                json={"input": "Can I pay by invoice?", "response": "Yes, for business plans."},
                headers=headers,
            )
            messages = await (
                await http.get(f"/memory/_plugins/_ml/memory/{memory_id}/messages", headers=headers)
            ).json()
            print("plugin route: memory", memory_id, "has", len(messages["messages"]), "message(s)")
            for _ in range(300):  # the message becomes a searchable record in the background
                found = await (
                    await http.get(
                        "/memory/v2/ai/conversation_histories",
                        params={"q": "paying with an invoice", "record_type": "ai_pipeline_storage"},
                        headers=headers,
                    )
                ).json()
                if found["data"]:
                    break
                await asyncio.sleep(0.1)
            print("search found:", [item["text"] for item in found["data"]])
    finally:
        await runner.cleanup()


if __name__ == "__main__":
    data = tempfile.mkdtemp(prefix="memory-plugin-mounted-")
    if "--check" in sys.argv:
        asyncio.run(check(data))
    else:
        web.run_app(build(data), host="127.0.0.1", port=8080)
