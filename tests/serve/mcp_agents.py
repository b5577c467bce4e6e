"""Scripted MCP agents for the proxy tests and benchmarks: deterministic sessions on the testbed servers.

`sqlite_clerk(client, seed)` keeps a shop's stock in mcp-server-sqlite: it looks at the tables, adds an item,
reads it back, restocks it, reads it again, sells some, and notes an insight; the seed picks the item, the
quantities and which optional steps it takes, so sessions differ the way one agent's sessions do.
`shop_database(path)` is the database each session starts from.
"""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path
from typing import Any

ITEMS = ["widget", "gadget", "sprocket", "gizmo", "doohickey", "bolt", "flange", "grommet", "lever", "spring"]
COLOURS = ["red", "blue", "green", "black", "white", "amber"]


def shop_database(path: Path) -> Path:
    """A fresh stock database at `path`: table `items` (id, name, colour, qty) holding three items."""
    path.unlink(missing_ok=True)
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, colour TEXT, qty INTEGER)")
        connection.executemany("INSERT INTO items (name, colour, qty) VALUES (?, ?, ?)",
                               [("anvil", "black", 2), ("bucket", "red", 5), ("chain", "grey", 9)])
    return path


def clerk_calls(seed: int) -> list[tuple[str, dict[str, Any]]]:
    """The calls of session `seed` (the same every time)."""
    rng = random.Random(seed)
    name = f"{rng.choice(ITEMS)}-{seed}"
    colour = rng.choice(COLOURS)
    qty, more, sold = rng.randint(1, 20), rng.randint(1, 9), rng.randint(1, 3)
    calls: list[tuple[str, dict[str, Any]]] = [("list_tables", {})]
    if rng.random() < 0.5:
        calls.append(("describe_table", {"table_name": "items"}))
    calls += [
        ("write_query", {"query": f"INSERT INTO items (name, colour, qty) VALUES ('{name}', '{colour}', {qty})"}),
        ("read_query", {"query": f"SELECT name, colour, qty FROM items WHERE name = '{name}'"}),
        ("write_query", {"query": f"UPDATE items SET qty = qty + {more} WHERE name = '{name}'"}),
        ("read_query", {"query": f"SELECT qty FROM items WHERE name = '{name}'"}),
    ]
    if rng.random() < 0.5:
        calls.append(("read_query", {"query": "SELECT COUNT(*) AS n FROM items"}))
    calls += [
        ("write_query", {"query": f"UPDATE items SET qty = qty - {sold} WHERE name = '{name}'"}),
        ("list_tables", {}),
        ("append_insight", {"insight": f"{name} ({colour}) restocked by {more}, {sold} sold"}),
    ]
    return calls


async def sqlite_clerk(client: Any, seed: int) -> list[tuple[str, dict[str, Any], str]]:
    """Play session `seed` through `client` (an MCP `Client`): each call, its arguments and the answer's text."""
    played = []
    for name, arguments in clerk_calls(seed):
        result = await client.call_tool(name, arguments)
        played.append((name, arguments, "\n".join(part.text for part in result.content)))
    return played
