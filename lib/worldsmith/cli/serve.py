"""`worldsmith serve BOOK --mcp | --http`: a worldbook simulator for other processes.

`--mcp` serves the book's actions as MCP tools (stdio by default: an agent framework launches the
command; `--transport http` serves streamable HTTP at http://HOST:PORT/mcp); each connection is
a saved session. `--http` serves the `Env` protocol (reset/step/close) for RL trainers, over
the book's simulator or, with `--env NAME` instead of a book, over a registered environment.
`--describe` prints what would be served (tools, endpoints, commands) and exits.

Over HTTP (either server) only loopback Host/Origin headers are accepted unless `--allow-host` /
`--allow-origin` add more, `--token` (repeatable), `--token-file` (one per line) or
$WORLDSMITH_TOKEN require a bearer token, each token its own namespace of session names, bodies
are capped, and sessions / env instances idle for `--idle-timeout` seconds are closed. Binding a
non-loopback host without a token prints a warning.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from worldsmith.cli.common import EXIT_OK, CommandError, add_common, emit_json, flag_errors, workspace_from
from worldsmith.serve.commands import DEFAULT_ENV_PORT, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_SESSIONS, DEFAULT_MCP_PORT
from worldsmith.serve.guard import (
    DEFAULT_MAX_REQUEST_BYTES,
    DEFAULT_MAX_RESPONSE_BYTES,
    TOKEN_ENV,
    ServeSecurity,
    bind_warning,
    serve_security,
)
from worldsmith.sim.factory import DEFAULT_WORLD_MODEL
from worldsmith.sim.registry import canonical_world_model, world_model_names

if TYPE_CHECKING:
    from worldsmith.serve import ServedWorldbook


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("serve", help="serve a worldbook simulator over MCP or as an HTTP environment")
    parser.add_argument("book", nargs="?", help="worldbook name in the workspace")
    mode = parser.add_mutually_exclusive_group()  # --describe alone describes both
    mode.add_argument("--mcp", action="store_true", help="an MCP server whose tools are the book's actions")
    mode.add_argument("--http", action="store_true", help="the Env protocol (reset/step/close) over HTTP")
    parser.add_argument("--transport", choices=["stdio", "http"], default="stdio", help="MCP transport (default stdio)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument(
        "--port", type=int, help=f"port (default {DEFAULT_MCP_PORT} for MCP, {DEFAULT_ENV_PORT} for --http)"
    )
    parser.add_argument("--version", help="worldbook version (default: HEAD)")
    parser.add_argument(
        "--method",
        type=canonical_world_model,
        choices=world_model_names(),
        default=DEFAULT_WORLD_MODEL,
        help="world model answering the calls (default: the harness)",
    )
    parser.add_argument("--model", metavar="SPEC", help="LLM spec or models.toml name for world models that use one")
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--initial", default="", help="opening observation of each session / the default task")
    parser.add_argument("--task", help="task text of each MCP session")
    parser.add_argument("--env", metavar="NAME", help="--http: serve this registered environment instead of a book")
    parser.add_argument(
        "--tasks",
        nargs="*",
        default=[],
        metavar="FILE",
        help="--http: episode files whose openings (and expert actions) are the tasks",
    )
    parser.add_argument("--dataset", help="--http: a workspace dataset whose episodes are the tasks")
    parser.add_argument("--split", help="--http: only episodes of this split")
    parser.add_argument("--max-steps", type=int, default=50, help="--http: steps before an episode is truncated")
    add_guard_flags(parser)
    parser.add_argument("--describe", action="store_true", help="print what would be served and exit (without "
                        "--mcp or --http: both ways of serving it)")
    add_common(parser)
    parser.set_defaults(handler=run_serve)


def add_guard_flags(parser: argparse.ArgumentParser) -> None:
    """The HTTP guard's flags (allow-lists, tokens, size limits, idle timeout, session cap): `security_from` reads
    them; `serve` and `proxy` share them."""
    parser.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="HOST",
        help="HTTP: also accept this Host header ('name', 'name:port', 'name:*'); loopback always",
    )
    parser.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="HTTP: also accept requests from this browser Origin ('https://name[:port]')",
    )
    parser.add_argument(
        "--token",
        action="append",
        default=[],
        help="HTTP: require 'Authorization: Bearer TOKEN'; repeat for one token per client, each its own namespace "
        f"of MCP session names (shown by `ps`: prefer --token-file; default: ${TOKEN_ENV})",
    )
    parser.add_argument(
        "--token-file",
        metavar="FILE",
        help="HTTP: accept the tokens in FILE, one per line ('#' comments), each its own namespace of session names",
    )
    parser.add_argument(
        "--max-request-bytes",
        type=int,
        default=DEFAULT_MAX_REQUEST_BYTES,
        help="HTTP: refuse larger request bodies with 413",
    )
    parser.add_argument(
        "--max-response-bytes",
        type=int,
        default=DEFAULT_MAX_RESPONSE_BYTES,
        help="--http: refuse larger responses with 413",
    )
    parser.add_argument(
        "--idle-timeout",
        type=float,
        default=DEFAULT_IDLE_TIMEOUT,
        metavar="SECONDS",
        help="close sessions / env instances unused this long (0: never)",
    )
    parser.add_argument(
        "--max-sessions",
        type=int,
        default=DEFAULT_MAX_SESSIONS,
        help="HTTP: most MCP sessions / env instances open at once",
    )


def _served(args: argparse.Namespace) -> ServedWorldbook:
    from worldsmith.serve import ServeConfig, ServedWorldbook

    if not args.book:
        raise CommandError("give a worldbook name (or, with --http, --env NAME)")
    try:
        config = ServeConfig(
            book=args.book,
            version=args.version,
            workspace=str(workspace_from(args).root),
            method=args.method,
            model=args.model,
            max_tokens=args.max_tokens,
            initial=args.initial,
            task=args.task,
        )
    except ValidationError as error:  # --max-tokens 0 ...
        raise flag_errors(error) from None
    return ServedWorldbook(config)


def describe_mcp(served: ServedWorldbook, args: argparse.Namespace, port: int) -> dict[str, Any]:
    """The tool list, the endpoint and the commands (with an MCP client config) for `--mcp`."""
    from worldsmith.serve import close_tool, serve_commands

    commands = serve_commands(
        args.book,
        version=args.version,
        method=args.method,
        workspace=str(workspace_from(args).root),
        host=args.host,
        mcp_port=port,
        allow_hosts=args.allow_host,
        allow_origins=args.allow_origin,
        token=bool(args.token or args.token_file or os.environ.get(TOKEN_ENV)),
        idle_timeout=args.idle_timeout,
        max_sessions=args.max_sessions,
    )
    return {
        "book": served.book_ref,
        "method": args.method,
        "transport": args.transport,
        "endpoint": commands.mcp_url if args.transport == "http" else "stdio",
        "tools": [tool.model_dump() for tool in served.tools],
        "close_tool": close_tool(served.book).name,
        "commands": {"stdio": commands.mcp_stdio, "http": commands.mcp_http},
        "client_config": commands.client_config,
    }


def _describe_both(args: argparse.Namespace, security: ServeSecurity) -> dict[str, Any]:
    """`--describe` without --mcp or --http: the book's tools and the commands of every way to serve it."""
    from worldsmith.serve import serve_commands

    description = describe_mcp(_served(args), args, args.port or DEFAULT_MCP_PORT)
    commands = serve_commands(args.book, version=args.version, method=args.method,
                              workspace=str(workspace_from(args).root), host=args.host,
                              mcp_port=args.port or DEFAULT_MCP_PORT, env_port=args.port or DEFAULT_ENV_PORT,
                              allow_hosts=args.allow_host, allow_origins=args.allow_origin,
                              idle_timeout=args.idle_timeout, max_sessions=args.max_sessions)
    description.pop("transport")
    description["endpoint"] = {"mcp_stdio": "stdio", "mcp_http": commands.mcp_url, "http_env": commands.env_url}
    description["commands"] = {"mcp_stdio": commands.mcp_stdio, "mcp_http": commands.mcp_http,
                               "http_env": commands.http_env}
    return description | _limits(args, security)


def _env_factory(args: argparse.Namespace) -> tuple[Any, str]:
    """A maker of fresh env instances, and what it serves."""
    if args.env:
        from worldsmith.envs import make

        make(args.env).close()  # fails here, clearly, if the environment cannot start
        return (lambda: make(args.env)), f"env {args.env}"
    from worldsmith.serve import task_episodes

    served = _served(args)
    episodes = task_episodes(  # a line that is not an episode: a BadInputError naming the file and line
        args.tasks, dataset=args.dataset, split=args.split, workspace=workspace_from(args).root
    )
    if (args.tasks or args.dataset) and not episodes:
        raise CommandError(
            "no episodes in the given --tasks/--dataset" + (f" (split {args.split})" if args.split else "")
        )
    return (lambda: served.sim_env(episodes, max_steps=args.max_steps)), f"worldbook {served.book_ref}"


def security_from(args: argparse.Namespace) -> ServeSecurity:
    """The allow-lists, token and limits from the flags; bad values are a `CommandError` naming the flag (a bad token
    file: a `BadInputError` naming it and the line, its tokens never shown)."""
    for flag in ("max_request_bytes", "max_response_bytes", "max_sessions"):
        if getattr(args, flag) <= 0:
            raise CommandError(f"--{flag.replace('_', '-')} must be positive")
    if args.idle_timeout < 0:
        raise CommandError("--idle-timeout must be 0 (never) or a positive number of seconds")
    try:
        return serve_security(
            args.allow_host,
            args.allow_origin,
            args.token,
            token_file=args.token_file,
            max_request_bytes=args.max_request_bytes,
            max_response_bytes=args.max_response_bytes,
        )
    except ValidationError as error:
        raise CommandError("; ".join(str(e["msg"]).removeprefix("Value error, ") for e in error.errors())) from None


def _warn_if_open(host: str, security: ServeSecurity) -> None:
    warning = bind_warning(host, security)
    if warning:
        print(warning, file=sys.stderr, flush=True)


def _limits(args: argparse.Namespace, security: ServeSecurity) -> dict[str, Any]:
    """What --describe and the listening line say about who may connect (never the token itself)."""
    return {
        "allowed_hosts": security.host_patterns(args.host),
        "allowed_origins": security.origin_patterns(),
        "token": "required" if security.requires_token else "none",
        "tokens": len(security.credentials()),
        "idle_timeout_s": args.idle_timeout or None,
        "max_sessions": args.max_sessions,
    }


def run_serve(args: argparse.Namespace) -> int:
    as_json = bool(getattr(args, "json", False))
    security = security_from(args)
    idle_timeout = args.idle_timeout or None
    if not (args.mcp or args.http):
        if not args.describe:
            raise CommandError("say how to serve: --mcp (the book's actions as MCP tools) or --http (the Env "
                               "protocol); --describe alone prints both")
        if args.env:
            args.http = True  # a registered environment is served over HTTP only
        else:
            _say(_describe_both(args, security), as_json)
            return EXIT_OK
    if args.mcp:
        if args.env:
            raise CommandError("--env serves a registered environment over --http; MCP serves a worldbook")
        port = args.port or DEFAULT_MCP_PORT
        served = _served(args)
        description = describe_mcp(served, args, port)
        if args.transport == "http":
            description |= _limits(args, security)
        if args.describe:
            _say(description, as_json)
            return EXIT_OK
        from worldsmith.serve import run_mcp_http, run_mcp_stdio

        if args.transport == "stdio":
            print(
                f"worldsmith: serving {served.book_ref} over MCP on stdio ({len(served.tools)} tools)", file=sys.stderr
            )
            run_mcp_stdio(served)
        else:
            _say({**description, "event": "listening"}, as_json, stream=sys.stdout)
            run_mcp_http(
                served,
                host=args.host,
                port=port,
                security=security,
                idle_timeout=idle_timeout,
                max_sessions=args.max_sessions,
            )
        return EXIT_OK
    port = args.port or DEFAULT_ENV_PORT
    make_env, what = _env_factory(args)
    url = f"http://{args.host}:{port}"
    description = {
        "serving": what,
        "endpoint": url,
        "routes": [
            "GET /info",
            "GET /tasks",
            "POST /reset",
            "POST /step",
            "POST /admissible_actions",
            "POST /expert_action",
            "POST /state",
            "POST /close",
        ],
        "client": f"from worldsmith.serve import HttpEnv; env = HttpEnv({url!r})",
        **_limits(args, security),
        "max_request_bytes": security.max_request_bytes,
        "max_response_bytes": security.max_response_bytes,
    }
    if args.describe:
        _say(description, as_json)
        return EXIT_OK
    import uvicorn

    from worldsmith.serve import build_env_app

    app = build_env_app(
        make_env, max_instances=args.max_sessions, idle_timeout=idle_timeout, security=security, bind=args.host
    )
    _warn_if_open(args.host, security)
    _say({**description, "event": "listening"}, as_json)
    uvicorn.run(app, host=args.host, port=port, log_level="warning")
    return EXIT_OK


def _say(value: dict[str, Any], as_json: bool, stream: Any = None) -> None:
    if as_json:
        emit_json(value)
        return
    out = stream or sys.stdout
    for key, item in value.items():
        if key == "tools":
            print(f"tools ({len(item)}):", file=out)
            for tool in item:
                print(
                    f"  {tool['name']}: {', '.join(tool['input_schema']['properties']) or '(no arguments)'}", file=out
                )
        elif isinstance(item, dict):
            print(f"{key}:", file=out)
            for name, text in item.items():
                print(f"  {name}: {text}", file=out)
        elif isinstance(item, list):
            print(f"{key}: {', '.join(map(str, item))}", file=out)
        else:
            print(f"{key}: {item}", file=out)
    out.flush()
