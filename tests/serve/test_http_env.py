"""`worldsmith serve --http`: the `Env` protocol over HTTP, driven through `HttpEnv` against a real server.

The served simulator answers exactly as the same `SimEnv` in-process (two interleaved remote
instances stay independent), passes the env checker, and keeps error kinds across the wire; a
registered real environment (BFCL) served the same way matches its local self. Rebinding Host
and foreign Origin are refused on loopback and on 0.0.0.0; there tokens are enforced (each sees only
its own instances), bodies are capped, idle instances expire to free the instance cap and say so
when used again, and closing twice is an error. Binding all interfaces without a
token warns on stderr (this server and the MCP one).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from serve_support import BFCL_SAMPLES, serving

from ports import free_port
from worldsmith.envs import Env, EnvError, UnknownTaskError, check_env, make
from worldsmith.serve import HttpEnv
from worldsmith.sim import Harness, SimEnv
from worldsmith.traces import Episode
from worldsmith.worldbook import WorldbookStore

pytestmark = pytest.mark.slow  # starts HTTP env servers as subprocesses


def _comparable(info: dict[str, Any]) -> dict[str, Any]:
    """The info without wall-clock timings (they differ between two equal steps)."""
    audit = info.get("audit")
    return {**info, "audit": {k: v for k, v in audit.items() if k != "latency_s"}} if isinstance(audit, dict) else info


def _play(env: Env, episode: Episode) -> list[tuple[Any, ...]]:
    observation, info = env.reset(episode.task_id)
    out: list[tuple[Any, ...]] = [(observation.text, _comparable(info))]
    for turn in episode.turns:
        step = env.step(turn.action)
        out.append((step.observation.text, step.reward, step.terminated, step.truncated, _comparable(step.info)))
    return out


@pytest.fixture(scope="module")
def sim_server(served_workspace: tuple[Path, list[Episode]]):
    workspace, _ = served_workspace
    port = free_port()
    with serving(
        workspace,
        "bfcl",
        "--http",
        "--port",
        str(port),
        "--tasks",
        str(BFCL_SAMPLES),
        ready_url=f"http://127.0.0.1:{port}/info",
    ):
        yield f"http://127.0.0.1:{port}"


def test_remote_simulator_matches_the_local_one(sim_server: str, served_workspace: tuple[Path, list[Episode]]) -> None:
    workspace, episodes = served_workspace
    book = WorldbookStore(workspace / "worldbooks").load("bfcl")
    first, second = episodes[0], episodes[1]
    local_env = SimEnv(Harness(book), tasks=episodes, book=book)
    local = [_play(local_env, episode) for episode in (first, second)]
    with HttpEnv(sim_server) as a, HttpEnv(sim_server) as b:
        assert a.name == local_env.name
        assert sorted(a.tasks()) == sorted(e.task_id for e in episodes)
        opened_a, opened_b = a.reset(first.task_id), b.reset(second.task_id)
        assert a.env_id != b.env_id
        remote_a: list[tuple[Any, ...]] = [(opened_a[0].text, _comparable(opened_a[1]))]
        remote_b: list[tuple[Any, ...]] = [(opened_b[0].text, _comparable(opened_b[1]))]
        for index in range(max(len(first.turns), len(second.turns))):  # interleaved: the instances stay apart
            for env, episode, out in ((a, first, remote_a), (b, second, remote_b)):
                if index < len(episode.turns):
                    step = env.step(episode.turns[index].action)
                    out.append(
                        (step.observation.text, step.reward, step.terminated, step.truncated, _comparable(step.info))
                    )
        assert a.expert_action() is None  # past the recorded episode's end, as locally
    assert [remote_a, remote_b] == local
    assert len(remote_a) == len(first.turns) + 1 and any(row[0] for row in remote_a[1:])


def test_remote_simulator_passes_the_env_checker_and_keeps_error_kinds(sim_server: str) -> None:
    check_env(HttpEnv(sim_server))
    env = HttpEnv(sim_server)
    with pytest.raises(EnvError, match="reset"):
        env.step("ls(a=True)")
    with pytest.raises(UnknownTaskError, match="no task 'nope'"):
        env.reset("nope")
    env.reset()
    env.env_id = "not-an-instance"
    with pytest.raises(EnvError, match="no env instance 'not-an-instance'"):
        env.step("ls(a=True)")
    env.close()
    env.close()


def test_a_registered_environment_served_over_http_matches_its_local_self(
    served_workspace: tuple[Path, list[Episode]],
) -> None:
    workspace, episodes = served_workspace
    port = free_port()
    episode = episodes[0]
    with serving(workspace, "--http", "--env", "bfcl", "--port", str(port), ready_url=f"http://127.0.0.1:{port}/info"):
        remote = HttpEnv(f"http://127.0.0.1:{port}")
        assert remote.name == "bfcl"
        played_remote = _play(remote, episode)
        check_env(remote, episode.task_id)
    local = make("bfcl")
    try:
        played_local = _play(local, episode)
    finally:
        local.close()
    assert played_remote == played_local
    assert [row[0] for row in played_local[1:]] == [turn.observation.text for turn in episode.turns]


def test_a_rebound_host_or_foreign_origin_cannot_drive_the_loopback_server(sim_server: str) -> None:
    before = httpx.get(f"{sim_server}/info", timeout=30).json()
    rebound = httpx.post(f"{sim_server}/reset", json={}, headers={"Host": "evil.example"}, timeout=30)
    assert rebound.status_code == 421 and rebound.json()["detail"]["error"] == "HostNotAllowed"
    crossed = httpx.post(f"{sim_server}/reset", json={}, headers={"Origin": "https://evil.example"}, timeout=30)
    assert crossed.status_code == 403 and crossed.json()["detail"]["error"] == "OriginNotAllowed"
    after = httpx.get(f"{sim_server}/info", timeout=30).json()
    assert (after["open"], after["closed"]) == (before["open"], before["closed"])  # neither made an instance


def test_on_all_interfaces_the_guard_holds_bodies_are_capped_and_idle_instances_free_the_cap(
    served_workspace: tuple[Path, list[Episode]],
) -> None:
    workspace, _ = served_workspace
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    auth = {"Authorization": "Bearer s3cret"}
    with serving(
        workspace,
        "bfcl",
        "--http",
        "--host",
        "0.0.0.0",
        "--port",
        str(port),
        "--token",
        "s3cret",
        "--token",
        "other",
        "--max-sessions",
        "2",
        "--idle-timeout",
        "1",
        "--max-request-bytes",
        "4000",
        ready_url=f"{url}/info",
    ) as process:
        statuses = {
            "rebound": httpx.post(f"{url}/reset", json={}, headers={"Host": "evil.example", **auth}).status_code,
            "foreign-origin": httpx.post(
                f"{url}/reset", json={}, headers={"Origin": "https://evil.example", **auth}
            ).status_code,
            "no-token": httpx.post(f"{url}/reset", json={}).status_code,
            "body": httpx.post(f"{url}/step", json={"env_id": "x", "action": "y" * 10_000}, headers=auth).status_code,
        }
        with pytest.raises(EnvError, match="Authorization: Bearer TOKEN"):
            HttpEnv(url)
        first, second, third = (HttpEnv(url, token="s3cret") for _ in range(3))
        first.reset()
        second.reset()
        with pytest.raises(EnvError, match="2 instances are open"):
            third.reset()
        time.sleep(1.5)  # both idle past the timeout: expired, their room free again
        third.reset()
        with pytest.raises(EnvError, match=r"expired after 1 s idle; reset\(\) without an env_id makes a new one"):
            first.step("ls(a=True)")
        stranger = HttpEnv(url, token="other")  # the second token: its own instances only
        stranger.env_id = third.env_id
        with pytest.raises(EnvError, match="here for you"):
            stranger.step("ls(a=True)")
        kept = third.env_id
        third.close()
        twice = httpx.post(f"{url}/close", json={"env_id": kept}, headers=auth)
        theirs = httpx.post(f"{url}/close", json={"env_id": kept}, headers={"Authorization": "Bearer other"})
        info = httpx.get(f"{url}/info", headers=auth).json()
        process.terminate()
        _, stderr = process.communicate(timeout=30)
    assert statuses == {"rebound": 421, "foreign-origin": 403, "no-token": 401, "body": 413}
    assert (info["open"], info["expired"], info["closed"]) == (0, 2, 1)
    assert twice.status_code == 410 and "was closed already" in twice.json()["detail"]["message"]
    assert theirs.status_code == 404 and b"other" not in stderr and b"s3cret" not in stderr
    assert b"without a token" not in stderr  # a token is set: no warning


@pytest.mark.parametrize("mode", [["--http"], ["--mcp", "--transport", "http"]])
def test_serving_all_interfaces_without_a_token_warns(
    served_workspace: tuple[Path, list[Episode]], mode: list[str]
) -> None:
    workspace, _ = served_workspace
    port = free_port()
    with serving(
        workspace, "bfcl", *mode, "--host", "0.0.0.0", "--port", str(port), ready_url=f"http://127.0.0.1:{port}/info"
    ) as process:
        process.terminate()
        _, stderr = process.communicate(timeout=30)
    assert b"warning: serving on 0.0.0.0 without a token" in stderr
