"""What `worldsmith proxy` adds to a forwarded call: the same calls straight to an MCP server and through the proxy.

    OMP_NUM_THREADS=1 python benchmarks/proxy_overhead.py [--server sqlite|time] [--calls 200] [--repeats 5]

The upstream is a real MCP server on this machine (mcp-server-sqlite answering a one-row SELECT, or
mcp-server-time answering get_current_time), started on stdio. Each pass opens one client session and times
`--calls` `call_tool` round trips (after 20 untimed ones):

1. **direct** — the SDK client starts the server itself (stdio);
2. **proxy record, stdio** — the client starts `worldsmith proxy --mode record` (stdio), which starts the server
   and journals every call (append + fsync) before it answers;
3. **proxy record, HTTP** — the same proxy serving streamable HTTP on 127.0.0.1 (loopback), the client over HTTP.

Per pass the median call; over `--repeats` passes the median of those. The overhead of a proxy row is its median
less the direct median. On a shared machine wall time mostly measures the other processes, so each row also
says what the proxy process itself spent: its CPU time (user + system, from psutil) per timed call, the part of
the overhead no scheduler can hide. Prints a table and writes benchmarks/results/proxy_overhead_SERVER.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "lib"), str(REPO / "tests"), str(REPO / "tests" / "serve")]

import httpx  # noqa: E402
import psutil  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402
from mcp_agents import shop_database  # noqa: E402

from mcp_testbeds import sqlite_server, time_server  # noqa: E402
from ports import free_port  # noqa: E402

RESULTS = REPO / "benchmarks" / "results"
WARMUP = 20


def _env(workspace: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{REPO / 'lib'}{os.pathsep}{REPO}", "WORLDSMITH_WORKSPACE": str(workspace)}


def _upstream(server: str, folder: Path) -> tuple[list[str], str, dict[str, Any]]:
    if server == "sqlite":
        return sqlite_server(shop_database(folder / "bench.db")), "read_query", {"query": "SELECT qty FROM items WHERE id = 1"}
    return time_server(), "get_current_time", {"timezone": "UTC"}


def _proxy_cpu() -> float:
    """CPU seconds the proxy processes below this one have spent so far."""
    total = 0.0
    for child in psutil.Process().children(recursive=True):
        try:
            if "proxy" in child.cmdline() and any("worldsmith" in part for part in child.cmdline()):
                times = child.cpu_times()
                total += times.user + times.system
        except psutil.Error:
            continue
    return total


def _timed(target: Any, tool: str, arguments: dict[str, Any], calls: int) -> tuple[list[float], float]:
    """The timed calls' wall times, and the proxy's CPU seconds per timed call (0 without a proxy)."""

    async def drive() -> tuple[list[float], float]:
        times = []
        async with Client(target, read_timeout_seconds=60) as client:
            cpu = 0.0
            for index in range(WARMUP + calls):
                if index == WARMUP:
                    cpu = _proxy_cpu()
                began = time.perf_counter()
                result = await client.call_tool(tool, arguments)
                if index >= WARMUP:
                    times.append(time.perf_counter() - began)
                if result.is_error:
                    raise RuntimeError(f"the server refused {tool}: {result.content}")
            cpu = (_proxy_cpu() - cpu) / calls
        return times, cpu

    return asyncio.run(drive())


def _http_proxy(command: list[str], workspace: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "worldsmith", "proxy", "--mode", "record", "--dataset", "bench-http", "--transport",
         "http", "--port", str(port), "--", *command], env=_env(workspace), stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}/mcp"
    deadline = time.monotonic() + 120
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"the proxy exited: {process.stderr.read().decode()[-2000:]}")
        try:
            httpx.get(url, timeout=2.0)
            return process, url
        except httpx.HTTPError:
            if time.monotonic() > deadline:
                raise RuntimeError("the proxy did not start") from None
            time.sleep(0.2)


def _row(passes: list[tuple[list[float], float]]) -> dict[str, Any]:
    medians = [statistics.median(times) * 1000 for times, _ in passes]
    p90s = [statistics.quantiles(times, n=10)[-1] * 1000 for times, _ in passes]
    return {"median_ms": round(statistics.median(medians), 3), "p90_ms": round(statistics.median(p90s), 3),
            "proxy_cpu_ms_per_call": round(statistics.median(cpu for _, cpu in passes) * 1000, 3),
            "pass_medians_ms": [round(m, 3) for m in medians]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", choices=["sqlite", "time"], default="sqlite")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        command, tool, arguments = _upstream(args.server, folder)
        direct = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
        proxied = StdioServerParameters(
            command=sys.executable, args=["-m", "worldsmith", "proxy", "--mode", "record", "--dataset", "bench", "--",
                                          *command], env=_env(folder))
        rows: dict[str, list[tuple[list[float], float]]] = {"direct": [], "proxy_record_stdio": [], "proxy_record_http": []}
        process, url = _http_proxy(command, folder)
        try:
            for _ in range(args.repeats):  # interleaved, so drift on a shared machine hits every row alike
                rows["direct"].append(_timed(direct, tool, arguments, args.calls))
                rows["proxy_record_stdio"].append(_timed(proxied, tool, arguments, args.calls))
                rows["proxy_record_http"].append(_timed(url, tool, arguments, args.calls))
        finally:
            process.terminate()
            process.wait(timeout=30)
    results = {name: _row(passes) for name, passes in rows.items()}
    base = results["direct"]["median_ms"]
    for name, row in results.items():
        row["overhead_ms"] = round(row["median_ms"] - base, 3)
        print(f"{name:22s} median {row['median_ms']:8.3f} ms  p90 {row['p90_ms']:8.3f} ms  "
              f"overhead {row['overhead_ms']:+8.3f} ms  proxy CPU {row['proxy_cpu_ms_per_call']:6.3f} ms/call")
    out = RESULTS / f"proxy_overhead_{args.server}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "when": datetime.now(UTC).isoformat(timespec="seconds"), "machine": f"{platform.node()} "
        f"{platform.machine()} {os.cpu_count()} cpus, Python {platform.python_version()}",
        "load_average": [round(load, 2) for load in os.getloadavg()],
        "server": args.server, "tool": tool, "calls": args.calls, "repeats": args.repeats, "results": results,
    }, indent=2) + "\n")
    print(f"wrote {out.relative_to(REPO)}")


if __name__ == "__main__":
    main()
