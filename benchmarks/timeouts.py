"""Wall-clock bounds the tests check only functionally: `chat_many` overlaps requests, the shell interrupts a
command at its timeout.

    OMP_NUM_THREADS=1 python benchmarks/timeouts.py [--repeats 3]

1. `OpenAILLM.chat_many` on 10 conversations against a local server that answers each after 0.15 s, with
   `max_concurrency=3`: serial would take 1.5 s, ideal overlap ~0.6 s (4 waves).
2. The shell environment with `timeout_s=1`: how long `step("sleep 100")` takes to return (needs bubblewrap).

Prints the medians and writes benchmarks/results/timeouts.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

from worldsmith.envs import make  # noqa: E402
from worldsmith.envs.shell import sandbox_available  # noqa: E402
from worldsmith.llm.openai_backend import OpenAILLM  # noqa: E402

DELAY_S = 0.15
REQUESTS = 10
CONCURRENCY = 3


class _SlowHandler(BaseHTTPRequestHandler):
    """Answers every chat completion after DELAY_S."""

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        time.sleep(DELAY_S)
        body = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                           "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"},
                                        "finish_reason": "stop"}],
                           "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def chat_many_wall_s() -> float:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SlowHandler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        llm = OpenAILLM("m", f"http://127.0.0.1:{server.server_address[1]}/v1", max_concurrency=CONCURRENCY)
        conversations = [[{"role": "user", "content": f"q{index}"}] for index in range(REQUESTS)]
        started = time.perf_counter()
        llm.chat_many(conversations)
        return time.perf_counter() - started
    finally:
        server.shutdown()
        server.server_close()


def shell_timeout_return_s() -> float:
    environment = make("shell", timeout_s=1.0, max_output_bytes=2000)
    try:
        environment.reset("text/count-errors")
        started = time.perf_counter()
        step = environment.step("sleep 100")
        elapsed = time.perf_counter() - started
        assert step.info["timed_out"], step.info
        return elapsed
    finally:
        environment.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "timeouts.json")
    options = parser.parse_args(argv)
    chat = [chat_many_wall_s() for _ in range(options.repeats)]
    results: dict[str, Any] = {"chat_many": {"requests": REQUESTS, "delay_s": DELAY_S, "max_concurrency": CONCURRENCY,
                                             "serial_s": REQUESTS * DELAY_S, "median_wall_s": statistics.median(chat),
                                             "runs_s": chat}}
    print(f"chat_many: {REQUESTS} x {DELAY_S} s at concurrency {CONCURRENCY}: median {statistics.median(chat):.2f} s "
          f"(serial {REQUESTS * DELAY_S:.2f} s)")
    usable, reason = sandbox_available()
    if usable:
        shell = [shell_timeout_return_s() for _ in range(options.repeats)]
        results["shell_timeout"] = {"timeout_s": 1.0, "median_return_s": statistics.median(shell), "runs_s": shell}
        print(f"shell: `sleep 100` with a 1 s timeout returns after median {statistics.median(shell):.2f} s")
    else:
        results["shell_timeout"] = {"skipped": reason}
        print(f"shell: skipped ({reason})")
    options.out.parent.mkdir(parents=True, exist_ok=True)
    options.out.write_text(json.dumps({"when": datetime.now(UTC).isoformat(timespec="seconds"),
                                       "host": platform.node(), "results": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
