"""The planner server: run as a script by `worldsmith.envs.alfworld.planner`, never imported by it.

Why a script of its own: it starts in a fresh interpreter that imports only Fast Downward, so it
has exactly one thread and forking it is safe (see `worldsmith.envs.alfworld.planner`). It loads
Fast Downward's library once; for each request it forks a child that loads the request's SAS
text into that still untouched copy of the library, searches, and answers.

Protocol, one line each way per request: in, JSON `{"sas": ..., "sas_replan": ..., "verbose": ...}`;
out, JSON: the plan's operator names, `[]` when the planner finds no plan, `null` when the child
failed. The library's own prints go to stderr, never into the answers. It exits at the end of its
input (the environment closed, or its process died).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable
from typing import IO, Any

__all__ = ["answer", "main", "plan", "serve"]


def plan(lib: Any, sas: str, sas_replan: str, verbose: bool) -> list[str]:
    """What `PddlState.replan` asks of the library, from the state the SAS text starts in: operator names."""
    import fast_downward

    lib.load_sas(sas.encode("utf-8"))
    lib.load_sas_replan(sas_replan.encode("utf-8"))
    if not lib.replan(verbose):
        return []
    operators = (fast_downward.Operator * lib.get_last_plan_length())()
    lib.get_last_plan(operators)
    return [operator.name for operator in operators]


def answer(lib: Any, request: dict[str, Any]) -> bytes:
    """The answer line to one request, planned in a forked child so the library stays untouched here."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: plan, write JSON, leave without running this process's exit handlers
        code = 1
        try:
            os.close(read_end)
            names = plan(lib, request["sas"], request["sas_replan"], bool(request.get("verbose")))
            with os.fdopen(write_end, "wb") as pipe:
                pipe.write(json.dumps(names).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    return data if os.waitstatus_to_exitcode(status) == 0 and data else b"null"


def serve(lib: Any, requests: Iterable[bytes], answers: IO[bytes]) -> None:
    """Answer each request line, in order, until the requests end."""
    for line in requests:
        answers.write(answer(lib, json.loads(line)) + b"\n")
        answers.flush()


def main() -> None:
    import fast_downward

    answers = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # the library prints to fd 1: keep it out of the answers
    serve(fast_downward.load_lib(), sys.stdin.buffer, answers)


if __name__ == "__main__":
    main()
