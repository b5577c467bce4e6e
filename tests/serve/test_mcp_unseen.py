"""A served book met as a new user meets it (issue 41): `worldsmith serve toolshop --mcp` as a real subprocess, driven
by the official MCP SDK client, asked about an order the recordings never showed: answered about itself, the same
on re-read and through another tool, and a write on it shows in the reads after it."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from serve_support import server_env

from worldsmith.sim.route_learning import build_simulator_book
from worldsmith.sim.sources.unseen import mentions
from worldsmith.traces import Episode
from worldsmith.worldbook import WorldbookStore

pytestmark = pytest.mark.slow  # starts an MCP server as a subprocess

TOOLSHOP = Path(__file__).resolve().parents[2] / "data_samples" / "toolshop"


def test_an_unseen_order_is_answered_about_itself_remembered_and_written(tmp_path: Path) -> None:
    episodes = [Episode.model_validate({k: v for k, v in json.loads(line).items() if k != "format"})
                for name in ("expert", "probing") for line in (TOOLSHOP / f"{name}.jsonl").read_text().splitlines()]
    book = build_simulator_book(episodes, name="toolshop").book
    WorldbookStore(tmp_path / "worldbooks").save(book)
    order = next(c for c in ("#O00017", "#O00117", "#O01017")
                 if not any(mentions(item.observation, c) for item in book.evidence))
    params = StdioServerParameters(command=sys.executable, env=server_env(tmp_path), args=[
        "-m", "worldsmith", "serve", "toolshop", "--mcp", "--initial", f"Hello, my order {order} never arrived."])
    address = {"line1": "1 Elm St", "line2": "", "city": "Reno", "state": "NV", "zip": "89501"}

    async def drive() -> list[str]:
        async with Client(params, read_timeout_seconds=120) as client:
            calls = [("get_order", {"order_id": order}), ("get_order_status", {"order_id": order}),
                     ("get_order", {"order_id": order}), ("modify_order_address", {"order_id": order, **address}),
                     ("get_order", {"order_id": order})]
            return [(await client.call_tool(name, arguments)).content[0].text for name, arguments in calls]

    first, status, again, written, after = asyncio.run(drive())
    record = json.loads(first)
    assert record["order_id"] == order and again == first
    assert json.loads(status) == {"order_id": order, "status": record["status"]}
    if written.startswith("{"):
        assert json.loads(after) == json.loads(written) and json.loads(after)["shipping_address"]["line1"] == "1 Elm St"
    else:  # a learned refusal (the order is not pending): nothing changed
        assert after == first
