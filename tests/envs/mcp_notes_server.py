"""A small stateful MCP server over streamable HTTP, on the official SDK: the mcp environment's URL testbed.

    python mcp_notes_server.py PORT NOTES.json

Notes live in a JSON file (so a reset command can restore it); `add_note` writes, `list_notes` and `get_note` read,
an unknown id is a tool error.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings


def main() -> None:
    port, store = int(sys.argv[1]), Path(sys.argv[2])
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

    server.run("streamable-http", host="127.0.0.1", port=port,
               transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))


if __name__ == "__main__":
    main()
