"""`worldsmith proxy --mode record|replay|hybrid ... [-- UPSTREAM COMMAND]`: an MCP server in front of another.

    worldsmith proxy --mode record --dataset sqlite -- mcp-server-sqlite --db-path shop.db
    worldsmith proxy --mode replay --book sqlite
    worldsmith proxy --mode hybrid --book sqlite --dataset sqlite --stats stats.jsonl -- mcp-server-sqlite ...

The upstream is the command after `--` (started on stdio) or `--upstream-url` (streamable HTTP). Clients reach
the proxy on stdio, or with `--transport http` at http://HOST:PORT/mcp behind the same guard as `serve` (the
same allow-list, token, limit and idle-timeout flags). `--describe` prints what would run and exits; with
`--json`, as JSON. See `worldsmith.serve.proxy` for what each mode does.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from pydantic import ValidationError

from worldsmith.cli.common import EXIT_OK, add_common, emit_json, flag_errors, workspace_from
from worldsmith.cli.serve import add_guard_flags, security_from
from worldsmith.serve.commands import DEFAULT_PROXY_PORT
from worldsmith.sim.registry import canonical_world_model, world_model_names


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "proxy", help="an MCP server in front of another: record its calls, replay them from a book, or both"
    )
    parser.add_argument("--mode", choices=["record", "replay", "hybrid"], required=True)
    parser.add_argument("--dataset", help="record / hybrid: the dataset each session is recorded into (an episode)")
    parser.add_argument("--book", help="replay / hybrid: the worldbook that answers")
    parser.add_argument("--version", help="worldbook version (default: HEAD)")
    parser.add_argument("--method", type=canonical_world_model, choices=world_model_names(),
                        help="world model answering from the book (default: the harness)")
    parser.add_argument("--model", metavar="SPEC", help="LLM spec for world models that use one")
    parser.add_argument("--upstream-url", metavar="URL", help="the upstream over streamable HTTP (instead of -- CMD)")
    parser.add_argument("--stats", metavar="FILE", help="append one JSON line per ended session to FILE")
    parser.add_argument("--read-only", action="append", default=[], metavar="TOOL",
                        help="hybrid: this tool only reads (the book may answer it when sure); repeatable")
    parser.add_argument("--max-error", type=float, default=None, metavar="P",
                        help="hybrid: the book answers only when its expected error is at most P (default 0.1)")
    parser.add_argument("--transport", choices=["stdio", "http"], default="stdio", help="to clients (default stdio)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=DEFAULT_PROXY_PORT)
    add_guard_flags(parser)
    parser.add_argument("--describe", action="store_true", help="print what would run and exit")
    parser.add_argument("upstream", nargs=argparse.REMAINDER, help="-- then the upstream's command line (stdio)")
    add_common(parser)
    parser.set_defaults(handler=run_proxy)


def _config(args: argparse.Namespace) -> Any:
    from worldsmith.serve.proxy import ProxyConfig

    command = list(args.upstream)
    if command and command[0] == "--":
        command = command[1:]
    extra = {"max_error": args.max_error} if args.max_error is not None else {}
    try:
        return ProxyConfig(mode=args.mode, workspace=str(workspace_from(args).root), dataset=args.dataset,
                           book=args.book, version=args.version, method=args.method, model=args.model,
                           upstream_command=command, upstream_url=args.upstream_url, stats=args.stats,
                           read_only=args.read_only, **extra)
    except ValidationError as error:
        raise flag_errors(error) from None


def run_proxy(args: argparse.Namespace) -> int:
    from worldsmith.serve.proxy import McpProxy, run_proxy_http, run_proxy_stdio

    as_json = bool(getattr(args, "json", False))
    config = _config(args)
    security = security_from(args)
    description = {
        "mode": config.mode,
        "upstream": config.upstream or None,
        "dataset": config.dataset,
        "book": config.book,
        "transport": args.transport,
        "endpoint": f"http://{args.host}:{args.port}/mcp" if args.transport == "http" else "stdio",
        "stats": config.stats,
    }
    if args.describe:
        if as_json:
            emit_json(description)
        else:
            for key, value in description.items():
                print(f"{key}: {value}")
        return EXIT_OK
    proxy = McpProxy(config)  # a missing book or dataset: its WorldsmithError, and exit code
    print(f"worldsmith: proxy ({config.mode}) {description['endpoint']} -> {config.upstream or config.book}",
          file=sys.stderr, flush=True)
    if args.transport == "stdio":
        run_proxy_stdio(proxy)
    else:
        run_proxy_http(proxy, host=args.host, port=args.port, security=security,
                       idle_timeout=args.idle_timeout or None, max_sessions=args.max_sessions)
    return EXIT_OK
