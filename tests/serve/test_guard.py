"""`serve.guard` alone: allow-list matching, the token from the environment, the open-bind warning, and the MCP
SDK's own transport security configured explicitly (never left to switch itself off on 0.0.0.0)."""

from __future__ import annotations

from pathlib import Path

import pytest

from worldsmith.serve import (
    GuardMiddleware,
    ServeConfig,
    ServedWorldbook,
    ServeSecurity,
    bind_warning,
    build_mcp_http_app,
    read_token_file,
    serve_security,
)
from worldsmith.traces import Episode


def _verdict(security: ServeSecurity, bind: str | None = None, **headers: str) -> int | None:
    """The refusal status for these request headers, or None when they pass."""
    guard = GuardMiddleware(lambda *_: None, security, bind=bind)
    refusal = guard.check({name.replace("_", "-").encode(): value.encode() for name, value in headers.items()})
    return None if refusal is None else int(refusal[0]["status"])


def test_hosts_and_origins_match_loopback_the_bound_address_and_the_given_names_only() -> None:
    plain = ServeSecurity()
    assert [_verdict(plain, host=host) for host in ("127.0.0.1:8766", "localhost", "[::1]:9", "LOCALHOST:1")] == [
        None,
        None,
        None,
        None,
    ]
    for rebound in ("evil.example", "127.0.0.1.evil.example:80", "localhost:80x", "localhost.:80", "", "0.0.0.0:8766"):
        assert _verdict(plain, host=rebound) == 421, rebound
    assert _verdict(plain, bind="0.0.0.0", host="0.0.0.0:8766") == 421  # all interfaces is not a name to trust
    assert _verdict(plain, bind="10.1.2.3", host="10.1.2.3:8766") is None  # the one address it listens on
    named = ServeSecurity(allow_hosts=["sim.lab", "gpu.lab:9000"], allow_origins=["https://ui.lab:*"])
    assert _verdict(named, host="sim.lab:1234") is None and _verdict(named, host="gpu.lab:9000") is None
    assert _verdict(named, host="gpu.lab:9001") == 421
    assert _verdict(named, host="sim.lab", origin="https://ui.lab:8443") is None
    assert _verdict(named, host="sim.lab", origin="http://ui.lab:8443") == 403
    assert _verdict(named, host="sim.lab", origin="null") == 403
    with pytest.raises(ValueError, match="--allow-host 'http://sim.lab'"):
        ServeSecurity(allow_hosts=["http://sim.lab"])


def test_the_token_comes_from_the_flag_or_the_environment_and_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORLDSMITH_TOKEN", "from-env")
    assert serve_security().token == "from-env" and serve_security(token="flag").token == "flag"
    secured = serve_security()
    assert "from-env" not in repr(secured)
    assert _verdict(secured, host="localhost") == 401
    assert _verdict(secured, host="localhost", authorization="Bearer from-env") is None
    assert _verdict(secured, host="localhost", authorization="Basic from-env") == 401
    assert _verdict(secured, host="evil.example", authorization="Bearer from-env") == 421  # the token is not a pass
    monkeypatch.delenv("WORLDSMITH_TOKEN")
    assert serve_security().token is None


def test_several_tokens_each_pass_as_their_own_credential_and_are_never_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORLDSMITH_TOKEN", "from-env")
    file = tmp_path / "tokens.txt"
    file.write_text("# one token per client\nalpha-123\n\n  beta-456  \nalpha-123\n")
    assert read_token_file(file) == ["alpha-123", "beta-456", "alpha-123"]
    security = serve_security(token=["flag-1"], token_file=file)
    assert security.credentials() == ["flag-1", "alpha-123", "beta-456"]  # the variable only when nothing is given
    assert security.requires_token and not any(t in repr(security) for t in ("flag-1", "alpha", "beta"))
    guard = GuardMiddleware(lambda *_: None, security)

    def credential(value: str) -> str | None:
        return guard.credential({b"authorization": value.encode()})

    assert [credential(f"Bearer {t}") for t in ("flag-1", "alpha-123", "beta-456")] == ["token-1", "token-2", "token-3"]
    assert credential("Bearer from-env") is None and credential("Bearer alpha-12") is None
    assert credential("Basic alpha-123") is None and credential("") is None
    assert _verdict(security, host="localhost", authorization="Bearer beta-456") is None
    assert _verdict(security, host="localhost", authorization="Bearer from-env") == 401
    assert serve_security().credentials() == ["from-env"]
    with pytest.raises(ValueError) as refused:  # a bad token is refused without being echoed
        ServeSecurity(tokens=["fine", "has space-secret"])
    assert "token 2 must be non-empty" in str(refused.value) and "space-secret" not in str(refused.value)
    bad = tmp_path / "bad.txt"
    bad.write_text("ok\nsplit secret\n")
    with pytest.raises(ValueError, match=r"bad.txt, line 2: a token must be one word") as named:
        read_token_file(bad)
    assert "secret" not in str(named.value)
    (tmp_path / "empty.txt").write_text("# nothing\n")
    with pytest.raises(ValueError, match="no tokens in it"):
        read_token_file(tmp_path / "empty.txt")
    with pytest.raises(ValueError, match="missing.txt: cannot read it"):
        read_token_file(tmp_path / "missing.txt")


def test_an_open_bind_without_a_token_warns() -> None:
    assert bind_warning("127.0.0.1", ServeSecurity()) is None and bind_warning("localhost", ServeSecurity()) is None
    warning = bind_warning("0.0.0.0", ServeSecurity())
    assert warning is not None and "0.0.0.0 without a token" in warning and "WORLDSMITH_TOKEN" in warning
    assert bind_warning("0.0.0.0", ServeSecurity(token="t")) is None
    assert bind_warning("0.0.0.0", ServeSecurity(tokens=["t", "u"])) is None


def test_the_mcp_sdk_rebinding_protection_is_on_with_our_lists_at_any_bind(
    served_workspace: tuple[Path, list[Episode]],
) -> None:
    workspace, _ = served_workspace
    served = ServedWorldbook(ServeConfig(book="bfcl", workspace=str(workspace)))
    for host in ("127.0.0.1", "0.0.0.0"):
        app = build_mcp_http_app(
            served, host=host, security=ServeSecurity(allow_hosts=["sim.lab"]), idle_timeout=5, max_sessions=7
        )
        manager = next(route.endpoint.session_manager for route in app.app.routes if route.path == "/mcp")
        settings = manager.security_settings
        assert settings.enable_dns_rebinding_protection, host
        assert "sim.lab:*" in settings.allowed_hosts and "127.0.0.1:*" in settings.allowed_hosts
        assert all("evil" not in allowed for allowed in settings.allowed_hosts + settings.allowed_origins)
        assert (manager.session_idle_timeout, manager.max_sessions) == (5, 7)
