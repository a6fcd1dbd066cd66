"""``memory-plugin``: serve, manage keys, bulk-ingest."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from memory_plugin.auth_opensearch import open_key_store
from memory_plugin.files import InUse
from memory_plugin.settings import Settings, load_settings


def _settings(args: argparse.Namespace) -> Settings:
    return load_settings(
        args.config,
        http={"host": getattr(args, "host", None), "port": getattr(args, "port", None)},
        data_dir=args.data_dir,
    )


def _serve(args: argparse.Namespace) -> int:
    settings = _settings(args)
    if args.workers != 1:
        from memory_plugin.workers import serve_workers

        return serve_workers(settings, args.workers)
    from memory_plugin.app import run

    try:
        run(settings)
    except InUse as error:
        print(f"memory-plugin: {error}", file=sys.stderr)
        return 1
    return 0


def _keys_create(args: argparse.Namespace) -> int:
    keys = open_key_store(_settings(args))
    entry, token = keys.create(args.org, args.user, args.backend_role or ())
    print(
        f"key_id:  {entry.key_id}\norg:     {entry.organization_id}\nuser:    {entry.user_id or '-'}\n"
        f"roles:   {','.join(entry.backend_roles) or '-'}\nkey:     {token}"
    )
    return 0


def _keys_revoke(args: argparse.Namespace) -> int:
    keys = open_key_store(_settings(args))
    if not keys.revoke(args.key_id):
        print(f"no key with id {args.key_id}", file=sys.stderr)
        return 1
    print(f"revoked {args.key_id}")
    return 0


def _keys_list(args: argparse.Namespace) -> int:
    for entry in open_key_store(_settings(args)).entries():
        state = "revoked" if entry.revoked else "active"
        roles = ",".join(entry.backend_roles) or "-"
        print(f"{entry.key_id}\t{entry.organization_id}\t{entry.user_id or '-'}\t{roles}\t{entry.created_at}\t{state}")
    return 0


def _ingest(args: argparse.Namespace) -> int:
    import asyncio

    from memory_plugin.ingest import ingest_file

    settings = _settings(args)
    url = args.url or f"http://{settings.http.host}:{settings.http.port}"
    summary = asyncio.run(
        ingest_file(args.file, url, args.key, batch_size=args.batch_size, concurrency=args.concurrency)
    )
    print(summary)
    return 1 if summary.failed else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memory-plugin", description=__doc__)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", type=Path, help="TOML settings file")
    common.add_argument("--data-dir", type=Path, help="data folder (default ./data)")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", parents=[common], help="run the HTTP server")
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.add_argument(
        "--workers",
        type=int,
        default=1,
        help="server processes on the port (default 1); more than 1 needs every store on OpenSearch",
    )
    serve.set_defaults(run=_serve)

    keys = commands.add_parser("keys", help="manage API keys").add_subparsers(dest="keys_command", required=True)
    create = keys.add_parser("create", parents=[common], help="create a key and print it once")
    create.add_argument("--org", required=True, help="organization id")
    create.add_argument("--user", help="user id within the organization")
    create.add_argument(
        "--backend-role",
        action="append",
        help="a backend role the key holds (repeatable): opens the containers shared with that role",
    )
    create.set_defaults(run=_keys_create)
    revoke = keys.add_parser("revoke", parents=[common], help="revoke a key by its id")
    revoke.add_argument("key_id")
    revoke.set_defaults(run=_keys_revoke)
    listing = keys.add_parser("list", parents=[common], help="list keys (never their secrets)")
    listing.set_defaults(run=_keys_list)
    ingest = commands.add_parser("ingest", parents=[common], help="bulk-load records from a JSON Lines file")
    ingest.add_argument("file", type=Path, help="one record per line, as in POST /v2/ai/conversation_histories")
    ingest.add_argument("--key", required=True, help="API key of the organisation to load into")
    ingest.add_argument("--url", help="server URL (default: the configured host and port)")
    ingest.add_argument("--batch-size", type=int, default=50, help="records per request (at most 100)")
    ingest.add_argument("--concurrency", type=int, default=4, help="requests in flight")
    ingest.set_defaults(run=_ingest)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args))
    except ValueError as error:  # settings errors
        print(f"memory-plugin: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
