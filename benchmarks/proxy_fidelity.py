"""How well a book built from proxied sessions stands in for the real MCP server (mcp-server-sqlite).

    OMP_NUM_THREADS=1 python benchmarks/proxy_fidelity.py [--train 30] [--test 10]

1. `--train` sessions of the scripted clerk agent (`tests/serve/mcp_agents.py`, seeds 0..) are recorded through
   the proxy's record mode (`McpProxy`, in-process, each on a fresh copy of the shop database) into a dataset;
   a worldbook is built from them (`build_simulator_book`).
2. `--test` unseen sessions (seeds 1000..) are played straight against the real server (fresh database each):
   the reference answers.
3. Replay: the book's harness and nearest evidence answer the same calls open-loop (each sees only its own
   answers); exact match per call against the real answer, with a cluster-bootstrap interval (clusters:
   sessions) and the paired harness-minus-nearest difference.
4. Hybrid: the same unseen sessions through `McpProxy` in hybrid mode in front of a fresh real server (the
   read-only tools named), exact match of what the client got against the real answers and the share forwarded.

Prints a summary and writes benchmarks/results/proxy_fidelity.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "lib"), str(REPO / "tests"), str(REPO / "tests" / "serve")]

from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402
from mcp_agents import clerk_calls, shop_database  # noqa: E402

from mcp_testbeds import sqlite_server  # noqa: E402
from worldsmith.evals.bootstrap import bootstrap_mean  # noqa: E402
from worldsmith.serve.proxy import McpProxy, ProxyConfig  # noqa: E402
from worldsmith.sim.base import episode_prefix  # noqa: E402
from worldsmith.sim.registry import make_world_model  # noqa: E402
from worldsmith.sim.route_learning import build_simulator_book  # noqa: E402
from worldsmith.workspace import Workspace  # noqa: E402
from worldsmith.worldbook import WorldbookStore  # noqa: E402

OUT = REPO / "benchmarks" / "results" / "proxy_fidelity.json"
READ_ONLY = ["list_tables", "describe_table", "read_query"]


def _text(result: Any) -> str:
    return "\n".join(part.text for part in result.content)


async def _through(proxy: McpProxy, calls: list[tuple[str, dict[str, Any]]]) -> list[str]:
    async with proxy.connected():
        return [_text(await proxy.call("bench", name, arguments)) for name, arguments in calls]


async def _direct(command: list[str], calls: list[tuple[str, dict[str, Any]]]) -> list[str]:
    params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    async with Client(params, read_timeout_seconds=60) as client:
        return [_text(await client.call_tool(name, arguments)) for name, arguments in calls]


def _open_loop(method: str, book: Any, calls: list[tuple[str, dict[str, Any]]]) -> list[str]:
    model = make_world_model(method, book)
    model.start(episode_prefix(""), None)
    answers = []
    for name, arguments in calls:
        answers.append(model.predict({"name": name, "arguments": arguments}).observation)
        model.commit()
    return answers


def _interval(clusters: list[str], values: list[float]) -> dict[str, float]:
    found = bootstrap_mean(clusters, values)
    return {"mean": round(found.mean, 4), "low": round(found.low, 4), "high": round(found.high, 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=int, default=30)
    parser.add_argument("--test", type=int, default=10)
    parser.add_argument("--keep", metavar="DIR", help="work in DIR (kept: the dataset, the book) instead of a temp folder")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.keep or tmp)
        db = root / "shop.db"
        for seed in range(args.train):
            proxy = McpProxy(ProxyConfig(mode="record", workspace=str(root), dataset="shop",
                                         upstream_command=sqlite_server(shop_database(db))))
            asyncio.run(_through(proxy, clerk_calls(seed)))
        episodes = list(Workspace(root).dataset("shop").iter_episodes())
        book = build_simulator_book(episodes, name="shop").book
        WorldbookStore(root / "worldbooks").save(book)
        seeds = list(range(1000, 1000 + args.test))
        clusters: list[str] = []
        harness_exact: list[float] = []
        nearest_exact: list[float] = []
        hybrid_exact: list[float] = []
        forwarded = calls_total = 0
        for seed in seeds:
            calls = clerk_calls(seed)
            real = asyncio.run(_direct(sqlite_server(shop_database(db)), calls))
            harness = _open_loop("harness", book, calls)
            nearest = _open_loop("nearest", book, calls)
            proxy = McpProxy(ProxyConfig(mode="hybrid", workspace=str(root), book="shop", dataset="hybrid",
                                         read_only=READ_ONLY, upstream_command=sqlite_server(shop_database(db))))
            hybrid = asyncio.run(_through(proxy, calls))
            clusters += [str(seed)] * len(calls)
            harness_exact += [float(a == b) for a, b in zip(harness, real, strict=True)]
            nearest_exact += [float(a == b) for a, b in zip(nearest, real, strict=True)]
            hybrid_exact += [float(a == b) for a, b in zip(hybrid, real, strict=True)]
            recorded = [e for e in Workspace(root).dataset("hybrid").iter_episodes()
                        if e.metadata["proxy"]["run"] == proxy.run_id]
            forwarded += sum(len(e.turns) for e in recorded)
            calls_total += len(calls)
    result = {
        "train_sessions": args.train, "test_sessions": args.test, "test_calls": len(clusters),
        "book": {"rules": len(book.rules), "tool_rules": len(book.tool_rules), "evidence": len(book.evidence)},
        "replay_exact": {"harness": _interval(clusters, harness_exact), "nearest": _interval(clusters, nearest_exact),
                         "harness_minus_nearest": _interval(
                             clusters, [a - b for a, b in zip(harness_exact, nearest_exact, strict=True)])},
        "hybrid": {"exact": _interval(clusters, hybrid_exact), "forwarded_share": round(forwarded / calls_total, 4),
                   "read_only": READ_ONLY},
    }
    print(json.dumps(result, indent=2))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"when": datetime.now(UTC).isoformat(timespec="seconds"), **result}, indent=2) + "\n")
    print(f"wrote {OUT.relative_to(REPO)}")


if __name__ == "__main__":
    main()
