"""The HTTP env app's bookkeeping, on a fake env through FastAPI's in-process client (unit tests of logic)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from fake_envs import CounterEnv
from worldsmith.envs import EnvError
from worldsmith.serve import HttpEnv, build_env_app


def _client(made: list[CounterEnv], **options: int) -> TestClient:
    def make() -> CounterEnv:
        made.append(CounterEnv())
        return made[-1]
    return TestClient(build_env_app(make, **options))


def test_instances_are_capped_closed_once_and_forgotten() -> None:
    made: list[CounterEnv] = []
    client = _client(made, max_instances=2)
    first, second, third = (HttpEnv("http://testserver", client=client) for _ in range(3))
    first.reset("reach-2")
    second.reset("reach-3")
    with pytest.raises(EnvError, match="2 instances are open; close some first"):
        third.reset()
    assert first.step("inc").observation.text == "count 1" and second.state() == {"count": 0, "target": 3}
    kept = first.env_id
    first.close()
    assert made[1].closed == 1  # made[0] is the probe the app made for its name and tasks
    assert client.post("/close", json={"env_id": kept}).json() == {"closed": False}
    third.reset("reach-2")  # room again
    assert client.get("/info").json() == {"name": "counter", "tasks": 3, "instances": 2}


def test_env_failures_come_back_as_errors_and_the_server_keeps_serving() -> None:
    env = HttpEnv("http://testserver", client=_client([]))
    with pytest.raises(EnvError, match="TaskLoadError: task 'broken' cannot load"):
        env.reset("broken")
    env.reset("raise-3")
    env.step("inc")
    with pytest.raises(EnvError, match="RuntimeError: the simulator fell over"):
        env.step("inc")
    assert env.reset("reach-2")[0].text == "count 0, target 2"
    assert env.expert_action() is not None and env.expert_action().name == "inc"
    assert env.admissible_actions() == ["dec", "inc"]
    bad = env._client.post("/step", json={"env_id": env.env_id, "action": 42})
    assert bad.status_code == 422  # neither an Action nor text: FastAPI's validation error names the field
    assert "action" in str(bad.json()["detail"])
