"""The HTTP env app's bookkeeping and guard, on a fake env through FastAPI's in-process client (unit tests of logic)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from fastapi.testclient import TestClient

from fake_envs import CounterEnv
from worldsmith.envs import EnvError
from worldsmith.serve import HttpEnv, ServeSecurity, build_env_app

TESTSERVER = ServeSecurity(allow_hosts=["testserver"])  # TestClient's Host; loopback alone is the default


def _client(made: list[CounterEnv], security: ServeSecurity = TESTSERVER, **options: Any) -> TestClient:
    def make() -> CounterEnv:
        made.append(CounterEnv())
        return made[-1]

    return TestClient(build_env_app(make, security=security, **options))


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
    again = client.post("/close", json={"env_id": kept})  # closing twice: a clear error, not a silent no-op
    assert again.status_code == 410 and again.json()["detail"]["error"] == "EnvError"
    assert f"env instance {kept!r} was closed already; reset() without an env_id" in again.json()["detail"]["message"]
    never = client.post("/close", json={"env_id": "never-made"})
    assert never.status_code == 404 and "no env instance 'never-made'" in never.json()["detail"]["message"]
    first.env_id = kept  # a worker that kept the id: told it was closed, never handed a fresh episode under it
    with pytest.raises(EnvError, match="was closed already"):
        first.step("inc")
    with pytest.raises(EnvError, match="was closed already"):
        first.reset("reach-2")
    first.env_id = None
    third.reset("reach-2")  # room again
    info = client.get("/info").json()
    assert (info["name"], info["tasks"], info["instances"], info["open"], info["closed"]) == ("counter", 3, 2, 2, 1)
    assert info["expired"] == 0 and info["max_instances"] == 2


def test_idle_instances_expire_and_free_the_cap() -> None:
    made: list[CounterEnv] = []
    client = _client(made, max_instances=2, idle_timeout=1.0)
    first, second, third = (HttpEnv("http://testserver", client=client) for _ in range(3))
    first.reset("reach-2")
    second.reset("reach-2")
    with pytest.raises(EnvError, match=r"2 instances are open; close some first \(idle ones close after 1s\)"):
        third.reset()
    time.sleep(0.6)
    first.step("inc")  # in use: its idle time starts again
    time.sleep(0.6)
    third.reset("reach-3")  # the cap is full: the idle one (second) is expired to make room, first is kept
    assert made[2].closed == 1 and made[1].closed == 0
    with pytest.raises(EnvError, match=r"env instance '\w+' expired after 1 s idle; reset\(\) without an env_id"):
        second.step("inc")
    assert first.step("inc").observation.text == "count 2"
    info = client.get("/info").json()
    assert (info["open"], info["expired"], info["idle_timeout_s"]) == (2, 1, 1.0)
    time.sleep(1.1)
    assert client.get("/info").json()["open"] == 0  # /info expires what is due before it counts
    assert [env.closed for env in made[1:]] == [1, 1, 1]


def test_the_background_sweep_closes_idle_instances_without_traffic() -> None:
    made: list[CounterEnv] = []
    with _client(made, idle_timeout=0.2) as client:  # as a context manager: the app's lifespan (the sweeper) runs
        HttpEnv("http://testserver", client=client).reset("reach-2")
        deadline = time.monotonic() + 5
        while made[1].closed == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert made[1].closed == 1


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


def test_foreign_hosts_and_origins_are_refused_loopback_ones_pass() -> None:
    client = _client([], security=ServeSecurity())
    refused = client.post("/reset", json={}, headers={"Host": "evil.example"})
    assert refused.status_code == 421 and refused.json()["detail"]["error"] == "HostNotAllowed"
    assert "'evil.example'" in refused.json()["detail"]["message"]
    assert client.post("/reset", json={}, headers={"Host": "localhost.evil.example:80"}).status_code == 421
    assert client.get("/info", headers={"Host": "127.0.0.1:8766"}).status_code == 200
    assert client.get("/info", headers={"Host": "localhost"}).status_code == 200
    crossed = client.post("/reset", json={}, headers={"Host": "127.0.0.1:8766", "Origin": "https://evil.example"})
    assert crossed.status_code == 403 and crossed.json()["detail"]["error"] == "OriginNotAllowed"
    assert client.get("/info", headers={"Host": "[::1]:1", "Origin": "http://localhost:3000"}).status_code == 200
    opened = _client([], security=ServeSecurity(allow_hosts=["sim.lab"], allow_origins=["https://ui.lab"]))
    assert opened.get("/info", headers={"Host": "sim.lab:8766", "Origin": "https://ui.lab"}).status_code == 200
    assert opened.get("/info", headers={"Host": "sim.lab:8766", "Origin": "https://ui.lab.evil"}).status_code == 403
    with pytest.raises(ValueError, match="--allow-origin 'ui.lab'"):
        ServeSecurity(allow_origins=["ui.lab"])


def test_a_token_is_required_on_every_route_when_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WORLDSMITH_TOKEN", raising=False)
    client = _client([], security=ServeSecurity(allow_hosts=["testserver"], token="s3cret"))
    for method, path in (("GET", "/info"), ("GET", "/tasks"), ("POST", "/reset"), ("POST", "/close")):
        refused = client.request(method, path, json={})
        assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer", path
    assert client.get("/info", headers={"Authorization": "Bearer wrong"}).status_code == 401
    with pytest.raises(EnvError, match="Authorization: Bearer TOKEN"):
        HttpEnv("http://testserver", client=client)
    env = HttpEnv("http://testserver", client=client, token="s3cret")
    assert env.reset("reach-2")[0].text == "count 0, target 2"
    monkeypatch.setenv("WORLDSMITH_TOKEN", "s3cret")  # the client reads the same variable as the server
    fresh = _client([], security=ServeSecurity(allow_hosts=["testserver"], token="s3cret"))
    assert HttpEnv("http://testserver", client=fresh).reset("reach-3")[0].text == "count 0, target 3"


def test_oversized_requests_and_responses_are_refused_with_413() -> None:
    client = _client(
        [], security=ServeSecurity(allow_hosts=["testserver"], max_request_bytes=1000, max_response_bytes=2000)
    )
    env = HttpEnv("http://testserver", client=client)
    env.reset("reach-2")
    big = client.post("/step", json={"env_id": env.env_id, "action": "x" * 5000})
    assert big.status_code == 413 and big.json()["detail"]["error"] == "RequestTooLarge"
    assert "5" in big.json()["detail"]["message"] and "limit of 1000 bytes" in big.json()["detail"]["message"]

    def chunks() -> Any:  # no Content-Length: the limit is counted while the body streams in
        for _ in range(10):
            yield b"x" * 500

    streamed = client.post("/step", content=chunks(), headers={"Content-Type": "application/json"})
    assert streamed.status_code == 413 and "over 1000 bytes" in streamed.json()["detail"]["message"]
    assert env.step("inc").observation.text == "count 1"  # the server is unharmed
    tasks = _client([], security=ServeSecurity(allow_hosts=["testserver"], max_response_bytes=10)).get("/tasks")
    assert tasks.status_code == 413 and tasks.json()["detail"]["error"] == "ResponseTooLarge"
    assert "limit of 10 bytes" in tasks.json()["detail"]["message"]


def test_each_token_sees_only_its_own_instances() -> None:
    made: list[CounterEnv] = []
    security = ServeSecurity(allow_hosts=["testserver"], token="alpha", tokens=["beta"])
    client = _client(made, security=security)
    alpha = HttpEnv("http://testserver", client=TestClient(client.app), token="alpha")
    beta = HttpEnv("http://testserver", client=TestClient(client.app), token="beta")
    alpha.reset("reach-2")
    alpha.step("inc")
    theirs = alpha.env_id
    beta.env_id = theirs  # the other client's id, learned somehow: unknown to this token
    for call in (lambda: beta.step("inc"), beta.state, lambda: beta.reset("reach-2")):
        with pytest.raises(EnvError, match=f"no env instance {theirs!r} here for you"):
            call()
    refused = beta._client.post("/close", json={"env_id": theirs})
    assert refused.status_code == 404
    assert alpha.state() == {"count": 1, "target": 2}  # untouched by the other token's attempts
    beta.env_id = None
    beta.reset("reach-3")
    assert beta.env_id != theirs and alpha.step("inc").observation.text == "count 2"
    alpha.close()
    info = beta._client.get("/info").json()
    assert (info["open"], info["closed"], info["expired"]) == (1, 1, 0)
