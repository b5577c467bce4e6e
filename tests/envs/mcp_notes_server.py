"""A small stateful MCP server over streamable HTTP, on the official SDK: the mcp environment's URL testbed.

    python mcp_notes_server.py PORT NOTES.json     # streamable HTTP on 127.0.0.1:PORT/mcp
    python mcp_notes_server.py stdio NOTES.json    # over stdio

Notes live in a JSON file (so a reset command can restore it); `add_note` writes, `list_notes` and `get_note` read,
an unknown id is a tool error; over stdio, `crash` ends the server at once (a server that dies mid-session).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings


def main() -> None:
    where, store = sys.argv[1], Path(sys.argv[2])
    server = MCPServer("notes")

    def load() -> list[dict[str, str]]:
        return json.loads(store.read_text()) if store.exists() else []

    @server.tool()
    def add_note(title: str, body: str) -> str:
        """Add a note; answers its id."""
        notes = load()
        notes.append({"id": f"n{len(notes) + 1}", "title": title, "body": body})
        store.write_text(json.dumps(notes))
        return json.dumps({"id": notes[-1]["id"]})

    @server.tool()
    def list_notes() -> str:
        """Every note's id and title."""
        return json.dumps([{"id": note["id"], "title": note["title"]} for note in load()])

    @server.tool()
    def get_note(note_id: str) -> str:
        """One note by id."""
        for note in load():
            if note["id"] == note_id:
                return json.dumps(note)
        raise ValueError(f"no note {note_id}")

    if where == "stdio":
        @server.tool()
        def crash() -> str:
            """End the server process at once."""
            os._exit(1)

        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=int(where),
                   transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))


if __name__ == "__main__":
    main()
