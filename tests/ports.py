"""The one free-port helper of the test suite (tests/ is on pytest's `pythonpath`)."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A localhost TCP port that was free a moment ago: nothing listens there once the probe is closed.

    Used both to start a server on it and, left unused, as an address where a connection is refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
