"""What serving costs: a simulator step in-process against the same step over MCP (stdio, HTTP) and the HTTP env.

    OMP_NUM_THREADS=1 python benchmarks/serve.py [--repeats 3]

A worldbook is built from the bundled BFCL samples in a temporary workspace; every sample
episode's recorded calls are replayed (the harness, no model):

1. **in-process session** — `ServedSession.play`: harness predict + commit + the session's SQLite
   commit and mirrors (what one MCP call does inside the server);
2. **MCP stdio / MCP HTTP** — the official SDK client's `call_tool` round trip against
   `worldsmith serve bfcl --mcp` (a subprocess), one session per pass;
3. **in-process SimEnv / HTTP env** — `SimEnv.step` against `HttpEnv.step` on `worldsmith serve
   bfcl --http` (reset not timed).

p50/p90 per call in milliseconds, medians over `--repeats` passes after a warm-up pass. Prints a
table and writes benchmarks/results/serve.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import httpx  # noqa: E402
import orjson  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client  # noqa: E402

from worldsmith.serve import SESSION_META_KEY, HttpEnv, ServeConfig, ServedWorldbook  # noqa: E402
from worldsmith.sim import Harness, SimEnv  # noqa: E402
from worldsmith.sim.route_learning import build_simulator_book  # noqa: E402
from worldsmith.traces import Episode  # noqa: E402
from worldsmith.worldbook import WorldbookStore  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "data_samples" / "collected" / "bfcl.jsonl"
OUT = REPO / "benchmarks" / "results" / "serve.json"


def _episodes() -> list[Episode]:
    return [Episode.model_validate({k: v for k, v in orjson.loads(line).items() if k != "format"})
            for line in SAMPLES.read_bytes().splitlines() if line.strip()]


def _summary(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    return {"p50_ms": 1000 * statistics.median(ordered), "p90_ms": 1000 * ordered[int(0.9 * (len(ordered) - 1))],
            "calls": len(ordered)}


def _passes(run: Callable[[], list[float]], repeats: int) -> dict[str, float]:
    run()  # warm-up
    results = [_summary(run()) for _ in range(repeats)]
    return {key: statistics.median(r[key] for r in results) for key in results[0]}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def _server(workspace: Path, *args: str, ready: str) -> Iterator[None]:
    env = {**os.environ, "WORLDSMITH_WORKSPACE": str(workspace)}
    process = subprocess.Popen([sys.executable, "-m", "worldsmith", "serve", *args], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            try:
                httpx.get(ready, timeout=2.0)
                break
            except httpx.HTTPError:
                time.sleep(0.2)
        yield
    finally:
        process.terminate()
        process.wait(timeout=10)


def _mcp_pass(client_target: Any, episodes: list[Episode], session: str | None) -> list[float]:
    async def drive() -> list[float]:
        times = []
        async with Client(client_target, read_timeout_seconds=120) as client:
            for episode in episodes:
                for turn in episode.turns:
                    start = time.perf_counter()
                    result = await client.call_tool(turn.action.name, turn.action.arguments,
                                                    meta={SESSION_META_KEY: session} if session else None)
                    times.append(time.perf_counter() - start)
                    if result.is_error:  # a timing of refusals would mean nothing
                        raise RuntimeError(f"the server refused {turn.action.name}: {result.content}")
        return times
    return asyncio.run(drive())


def _env_pass(env: Any, episodes: list[Episode]) -> list[float]:
    times = []
    for episode in episodes:
        env.reset(episode.task_id)
        for turn in episode.turns:
            start = time.perf_counter()
            env.step(turn.action)
            times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    episodes = _episodes()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as folder:
        workspace = Path(folder)
        book = build_simulator_book(episodes, name="bfcl").book
        WorldbookStore(workspace / "worldbooks").save(book)
        served = ServedWorldbook(ServeConfig(book="bfcl", workspace=str(workspace)))

        def in_process() -> list[float]:
            session, times = served.open_session("bench"), []
            for episode in episodes:
                for turn in episode.turns:
                    start = time.perf_counter()
                    session.call(turn.action.name, turn.action.arguments)
                    times.append(time.perf_counter() - start)
            session.close()
            return times

        results["in_process_session"] = _passes(in_process, args.repeats)
        stdio = StdioServerParameters(command=sys.executable, args=["-m", "worldsmith", "serve", "bfcl", "--mcp"],
                                      env={**os.environ, "WORLDSMITH_WORKSPACE": str(workspace)})
        results["mcp_stdio"] = _passes(lambda: _mcp_pass(stdio, episodes, None), args.repeats)
        port = _free_port()
        with _server(workspace, "bfcl", "--mcp", "--transport", "http", "--port", str(port), "--token", "bench",
                     ready=f"http://127.0.0.1:{port}/info"):
            counter = iter(range(10**6))  # named sessions belong to a token (without one a name is refused)

            def http_client() -> Any:
                return streamable_http_client(f"http://127.0.0.1:{port}/mcp",
                                              http_client=create_mcp_http_client(headers={"Authorization": "Bearer bench"}))

            results["mcp_http"] = _passes(lambda: _mcp_pass(http_client(), episodes, f"bench-{next(counter)}"),
                                          args.repeats)
        local = SimEnv(Harness(book), tasks=episodes, book=book)
        results["in_process_simenv"] = _passes(lambda: _env_pass(local, episodes), args.repeats)
        port = _free_port()
        with _server(workspace, "bfcl", "--http", "--port", str(port), "--tasks", str(SAMPLES),
                     ready=f"http://127.0.0.1:{port}/info"):
            remote = HttpEnv(f"http://127.0.0.1:{port}")
            results["http_env"] = _passes(lambda: _env_pass(remote, episodes), args.repeats)
            remote.close()
    print(f"{'path':<22}{'p50 ms':>10}{'p90 ms':>10}{'calls':>8}")
    for name, row in results.items():
        print(f"{name:<22}{row['p50_ms']:>10.2f}{row['p90_ms']:>10.2f}{int(row['calls']):>8}")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"when": datetime.now(UTC).isoformat(timespec="seconds"), "repeats": args.repeats,
                               "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                                           "platform": platform.platform()},
                               "results": results}, indent=2) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
