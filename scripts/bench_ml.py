"""Remote model calls through our connectors, beside the remote endpoint called directly, in one run.

    python scripts/bench_ml.py [--requests 2000] [--concurrency 1,8,32] [--out bench-results/ml.json]

Starts, as subprocesses on loopback: our server, the scripted OpenAI-compatible server
(``tests/support/scripted_openai.py``) that our connectors call, and an aiohttp hello-world on
uvloop.  It then drives, with the same aiohttp client:

- ``remote endpoint direct``: chat completions straight to the scripted server (what a caller
  without us pays);
- ``predict via connector``: ``POST /_plugins/_ml/models/{id}/_predict`` on a deployed remote
  model whose connector calls that server (the difference is our cost: routing, the key check,
  the budget, the template, opening the sealed key, the outgoing call and Gson-style rendering);
- ``hello-world POST``: the floor of an aiohttp server on this machine;
- ``text_embedding built-in``: ``POST /_plugins/_ml/_predict/text_embedding/built-in`` with one
  short text (the embedding model's own cost dominates).

It prints req/s, p50/p99 and our server's CPU per request, and writes JSON and a chart.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
from pathlib import Path

import aiohttp
from tqdm import tqdm

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from _plots import plot_memory, write_report  # noqa: E402
from bench_memory import drive  # noqa: E402

from memory_plugin.auth import KeyStore  # noqa: E402
from tests.support.live import LiveServer, free_port  # noqa: E402

ML = "/_plugins/_ml"
MESSAGES = [{"role": "user", "content": "What is the capital of Portugal?"}]


def chat_connector(url: str) -> dict:
    return {
        "name": "bench chat",
        "version": 1,
        "protocol": "http",
        "parameters": {"model": "gpt-bench"},
        "credential": {"openAI_key": "sk-bench"},
        "actions": [
            {
                "action_type": "predict",
                "method": "POST",
                "url": f"{url}/v1/chat/completions",
                "headers": {"Authorization": "Bearer ${credential.openAI_key}"},
                "request_body": '{ "model": "${parameters.model}", "messages": ${parameters.messages} }',
            }
        ],
    }


async def deployed_model(server_url: str, headers: dict, remote_url: str) -> str:
    async with aiohttp.ClientSession(server_url, headers=headers) as http:
        async with http.post(f"{ML}/connectors/_create", json=chat_connector(remote_url)) as response:
            connector_id = (await response.json())["connector_id"]
        body = {"name": "bench", "function_name": "remote", "connector_id": connector_id}
        async with http.post(f"{ML}/models/_register?deploy=true", json=body) as response:
            assert response.status == 200, await response.text()
            return str((await response.json())["model_id"])


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument(
        "--concurrency", default="1,8,32", type=lambda s: [int(x) for x in s.split(",")], help="client counts"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "ml.json")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="bench-ml-"))
    _, token = KeyStore(workdir / "data" / "keys.json").create("bench-org", "bench-user")
    headers = {"Authorization": f"Bearer {token}"}
    config = workdir / "memory-plugin.toml"
    # The scripted server is on loopback: trust it, and lift the per-organisation budget out of the way.
    config.write_text(
        "[ml]\ntrusted_endpoints_regex = ['^http://127\\.0\\.0\\.1:.*$']\nallow_private_addresses = true\n"
        "org_calls_per_minute = 0\norg_concurrent_calls = 0\n"
    )
    remote_port, hello_port = free_port(), free_port()
    remote = subprocess.Popen([sys.executable, "-m", "tests.support.scripted_openai", str(remote_port)], cwd=ROOT)
    hello = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "hello_world.py"), str(hello_port), "--uvloop"])
    remote_url = f"http://127.0.0.1:{remote_port}"
    results = []
    try:
        with LiveServer(workdir / "data", config=config, env={"MEMORY_PLUGIN_LOG_LEVEL": "warning"}) as server:
            assert server.process is not None
            await asyncio.sleep(1.0)  # let the helpers bind
            model_id = await deployed_model(server.url, headers, remote_url)
            pid = server.process.pid
            chat = {"model": "gpt-bench", "messages": MESSAGES}
            cases = [
                ("remote endpoint direct", f"{remote_url}/v1/chat/completions", chat, {}, remote.pid),
                ("predict via connector", f"{server.url}{ML}/models/{model_id}/_predict", None, headers, pid),
                ("hello-world POST", f"http://127.0.0.1:{hello_port}/", chat, {}, hello.pid),
                (
                    "text_embedding built-in",
                    f"{server.url}{ML}/_predict/text_embedding/built-in",
                    lambda n: {"text_docs": [f"a short text number {n}"]},
                    headers,
                    pid,
                ),
            ]
            predict = {"parameters": {"messages": MESSAGES}}
            total = args.requests * len(cases) * len(args.concurrency)
            with tqdm(total=total, unit="req", desc="bench_ml") as bar:
                for concurrency in args.concurrency:
                    for name, url, body, case_headers, case_pid in cases:
                        payload = predict if body is None else body
                        results.append(
                            await drive(
                                name, url, "POST", payload, case_headers, args.requests, concurrency, bar, case_pid
                            )
                        )
    finally:
        for process in (remote, hello):
            process.terminate()
            process.wait()

    direct = {row["concurrency"]: row for row in results if row["case"] == "remote endpoint direct"}
    print(f"\n{'case':<26}{'clients':>8}{'req/s':>10}{'p50 ms':>10}{'p99 ms':>10}{'cpu ms/req':>12}  statuses")
    for row in results:
        print(
            f"{row['case']:<26}{row['concurrency']:>8}{row['req_per_s']:>10}{row['p50_ms']:>10}{row['p99_ms']:>10}"
            f"{row['server_cpu_ms_per_request']:>12}  {row['statuses']}"
        )
        if row["case"] == "predict via connector":
            row["added_p50_ms"] = round(row["p50_ms"] - direct[row["concurrency"]]["p50_ms"], 2)
    for row in results:
        if "added_p50_ms" in row:
            print(f"predict adds {row['added_p50_ms']} ms at p50 with {row['concurrency']} clients")
    write_report(args.out, {"results": results}, plot_memory)


if __name__ == "__main__":
    asyncio.run(main())
