"""Who may talk to a served simulator, and how much: the checks in front of every HTTP surface.

A server bound to 127.0.0.1 is still reachable from a web page after DNS rebinding (the page's
name resolves to 127.0.0.1, its requests carry `Host: evil.example`) and from any page by a
cross-origin POST (`Origin: https://evil.example`). So both servers (MCP over streamable HTTP and
the HTTP env) sit behind `GuardMiddleware`, which answers before the app sees a request:

- `Host` must be loopback (127.0.0.1, localhost, [::1], any port), the specific address the server
  is bound to, or one given with `--allow-host` — else 421; never switched off by the bind address.
- `Origin`, when a browser sends one, must be a loopback origin or one given with `--allow-origin`
  — else 403.
- With tokens (`--token`, repeatable; `--token-file`, one per line; or $WORLDSMITH_TOKEN),
  `Authorization: Bearer TOKEN` with one of them on every request — else 401. Each token is compared
  in constant time and never logged or echoed; the request's scope then carries which one it was
  (`credential_of`: an opaque `token-N`, never the token), so the servers can keep each token's
  sessions apart.
- A request body over `max_request_bytes` is refused with 413 before it is parsed; with
  `max_response_bytes`, so is a response over that size (the HTTP env; MCP streams its answers).

Refusals are JSON `{"detail": {"error": KIND, "message": WHY}}`, the shape `HttpEnv` reads.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, field_validator

from worldsmith.util.errors import BadInputError

__all__ = [
    "DEFAULT_MAX_REQUEST_BYTES",
    "DEFAULT_MAX_RESPONSE_BYTES",
    "CREDENTIAL_SCOPE_KEY",
    "LOOPBACK_HOSTS",
    "TOKEN_ENV",
    "GuardMiddleware",
    "ServeSecurity",
    "bind_warning",
    "credential_of",
    "is_loopback",
    "read_token_file",
    "serve_security",
]

TOKEN_ENV = "WORLDSMITH_TOKEN"
CREDENTIAL_SCOPE_KEY = "worldsmith.credential"
"""ASGI scope key the guard sets to the opaque name (`token-N`) of the token a request carried."""
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
DEFAULT_MAX_REQUEST_BYTES = 4 * 1024 * 1024
DEFAULT_MAX_RESPONSE_BYTES = 32 * 1024 * 1024

ASGIApp = Any  # (scope, receive, send) -> awaitable; starlette's alias, kept local so this module stays light
Message = dict[str, Any]


def _host_patterns(name: str) -> list[str]:
    """`name` as Host patterns: exactly as given, and with any port unless it names one."""
    return [name] if name.endswith(":*") or _has_port(name) else [name, f"{name}:*"]


def _has_port(host: str) -> bool:
    tail = host.rsplit("]", 1)[-1] if host.startswith("[") else host
    return ":" in tail


def _origin_patterns(origin: str) -> list[str]:
    rest = origin.split("://", 1)[1]
    return [origin] if origin.endswith(":*") or _has_port(rest) else [origin, f"{origin}:*"]


def _matches(value: str, patterns: Sequence[str]) -> bool:
    for pattern in patterns:
        if value == pattern or (
            pattern.endswith(":*") and value.startswith(pattern[:-1]) and value[len(pattern) - 1 :].isdigit()
        ):
            return True
    return False


class ServeSecurity(BaseModel):
    """The allow-lists, tokens and size limits of one server (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)  # a refused token is never echoed

    allow_hosts: list[str] = Field(
        default_factory=list, description="Host values besides loopback: 'name' (any port), 'name:port' or 'name:*'."
    )
    allow_origins: list[str] = Field(
        default_factory=list, description="Origins besides loopback: 'https://name' (any port), with ':port' or ':*'."
    )
    token: str | None = Field(default=None, repr=False, description="Bearer token every request must carry.")
    tokens: list[str] = Field(
        default_factory=list,
        repr=False,
        description="More accepted bearer tokens (one per client): each is its own namespace of session names.",
    )
    max_request_bytes: int = Field(default=DEFAULT_MAX_REQUEST_BYTES, gt=0)
    max_response_bytes: int | None = Field(default=DEFAULT_MAX_RESPONSE_BYTES, gt=0)

    @field_validator("allow_hosts")
    @classmethod
    def _plain_hosts(cls, hosts: list[str]) -> list[str]:
        for host in hosts:
            if not host or "/" in host or "*" in host.removesuffix(":*") or any(c.isspace() for c in host):
                raise BadInputError(f"--allow-host {host!r}: give a host name or address, optionally ':PORT' or ':*'")
        return [host.lower() for host in hosts]

    @field_validator("allow_origins")
    @classmethod
    def _plain_origins(cls, origins: list[str]) -> list[str]:
        for origin in origins:
            scheme, _, rest = origin.partition("://")
            if scheme not in ("http", "https") or not rest or "/" in rest or "*" in rest.removesuffix(":*"):
                raise BadInputError(f"--allow-origin {origin!r}: give 'http(s)://HOST', optionally ':PORT' or ':*'")
        return [origin.lower() for origin in origins]

    @field_validator("token")
    @classmethod
    def _usable_token(cls, token: str | None) -> str | None:
        if token is not None and not _usable(token):
            raise BadInputError("the token must be non-empty and without whitespace")
        return token

    @field_validator("tokens")
    @classmethod
    def _usable_tokens(cls, tokens: list[str]) -> list[str]:
        for index, token in enumerate(tokens):
            if not _usable(token):
                raise BadInputError(f"token {index + 1} must be non-empty and without whitespace")
        return tokens

    def credentials(self) -> list[str]:
        """Every accepted token, `token` first, each once; their order numbers the `token-N` credentials."""
        return list(dict.fromkeys([*([self.token] if self.token else []), *self.tokens]))

    @property
    def requires_token(self) -> bool:
        return bool(self.token or self.tokens)

    def host_patterns(self, bind: str | None = None) -> list[str]:
        """Allowed Host values (exact, or `name:*` for any port), loopback first; a specific bind address too."""
        names = [*LOOPBACK_HOSTS]
        if bind and not is_loopback(bind) and _specific_address(bind):
            names.append(f"[{bind}]" if ":" in bind else bind)
        patterns = [pattern for name in names for pattern in _host_patterns(name)]
        return patterns + [pattern for host in self.allow_hosts for pattern in _host_patterns(host)]

    def origin_patterns(self) -> list[str]:
        """Allowed Origin values: loopback over http and https, then the given ones."""
        loopback = [f"{scheme}://{name}" for name in LOOPBACK_HOSTS for scheme in ("http", "https")]
        return [pattern for origin in [*loopback, *self.allow_origins] for pattern in _origin_patterns(origin)]


def _usable(token: str) -> bool:
    return bool(token) and not any(c.isspace() for c in token)


def read_token_file(path: str | Path) -> list[str]:
    """The tokens of a token file: one per line; blank lines and `#` comments skipped.

    ValueError names the file and line of a bad one (never its text), or says the file holds none."""
    file = Path(path)
    try:
        lines = file.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise BadInputError(f"cannot read it ({type(error).__name__})", where=f"--token-file {file}") from None
    tokens = []
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        if not _usable(text):
            raise BadInputError("a token must be one word without whitespace", where=f"--token-file {file}, line {number}")
        tokens.append(text)
    if not tokens:
        raise BadInputError("no tokens in it (one per line)", where=f"--token-file {file}")
    return tokens


def credential_of(scope: Mapping[str, Any]) -> str | None:
    """The opaque name (`token-N`) of the token this request carried, or None on a server without tokens."""
    value = scope.get(CREDENTIAL_SCOPE_KEY)
    return value if isinstance(value, str) else None


def _specific_address(host: str) -> bool:
    try:
        return not ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return True  # a name the server was bound to: its clients use it as Host


def is_loopback(host: str) -> bool:
    """Whether binding `host` keeps the server on this machine."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def serve_security(
    allow_hosts: Sequence[str] = (),
    allow_origins: Sequence[str] = (),
    token: str | Sequence[str] | None = None,
    *,
    token_file: str | Path | None = None,
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    max_response_bytes: int | None = DEFAULT_MAX_RESPONSE_BYTES,
) -> ServeSecurity:
    """The security of a server started from the CLI: `token` (one or several) and the tokens of `token_file`;
    neither given means $WORLDSMITH_TOKEN (if set)."""
    given = [token] if isinstance(token, str) else list(token or [])
    if token_file is not None:
        given += read_token_file(token_file)
    if not given and os.environ.get(TOKEN_ENV):
        given = [os.environ[TOKEN_ENV]]
    return ServeSecurity(
        allow_hosts=list(allow_hosts),
        allow_origins=list(allow_origins),
        token=given[0] if given else None,
        tokens=given[1:],
        max_request_bytes=max_request_bytes,
        max_response_bytes=max_response_bytes,
    )


def bind_warning(host: str, security: ServeSecurity) -> str | None:
    """The warning to print when a server is reachable from other machines and anyone there may use it."""
    if is_loopback(host) or security.requires_token:
        return None
    return (
        f"worldsmith: warning: serving on {host} without a token: anyone who can reach this port can use it; "
        f"set --token, --token-file or ${TOKEN_ENV}"
    )


def _refusal(status: int, kind: str, message: str, headers: Sequence[tuple[bytes, bytes]] = ()) -> list[Message]:
    body = orjson.dumps({"detail": {"error": kind, "message": message}})
    start = {
        "type": "http.response.start",
        "status": status,
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *headers],
    }
    return [start, {"type": "http.response.body", "body": body}]


class GuardMiddleware:
    """ASGI middleware enforcing a `ServeSecurity` on every HTTP request (module docstring)."""

    def __init__(
        self, app: ASGIApp, security: ServeSecurity, bind: str | None = None, limit_responses: bool = True
    ) -> None:
        self.app = app
        self.security = security
        self.hosts = security.host_patterns(bind)
        self.origins = security.origin_patterns()
        # digests of equal length: comparing them takes the same time whatever the token or the guess
        self.digests = [hashlib.sha256(token.encode()).digest() for token in security.credentials()]
        self.limit_responses = limit_responses and security.max_response_bytes is not None

    def credential(self, headers: dict[bytes, bytes]) -> str | None:
        """`token-N` for the N-th accepted token (from 1) this request carries, else None.

        Every token is compared (constant time each, no early exit), so the time taken says nothing about
        which token, if any, was close."""
        scheme, _, given = headers.get(b"authorization", b"").partition(b" ")
        digest = hashlib.sha256(given.strip()).digest()
        found = 0
        for index, known in enumerate(self.digests, 1):
            if hmac.compare_digest(digest, known) and not found:
                found = index
        return f"token-{found}" if found and scheme.lower() == b"bearer" else None

    def check(self, headers: dict[bytes, bytes]) -> list[Message] | None:
        """The refusal for these request headers, or None when they pass."""
        host = headers.get(b"host", b"").decode("latin-1").lower()
        if not _matches(host, self.hosts):
            return _refusal(
                421,
                "HostNotAllowed",
                f"Host {host!r} is not served here (DNS rebinding?); the server allows loopback and --allow-host names",
            )
        origin = headers.get(b"origin", b"").decode("latin-1").lower()
        if origin and not _matches(origin, self.origins):
            return _refusal(
                403,
                "OriginNotAllowed",
                f"Origin {origin!r} may not use this server; the server allows loopback and --allow-origin origins",
            )
        if self.digests and self.credential(headers) is None:
            return _refusal(
                401,
                "Unauthorized",
                f"this server needs 'Authorization: Bearer TOKEN' (one of the server's --token, --token-file "
                f"or ${TOKEN_ENV})",
                [(b"www-authenticate", b"Bearer")],
            )
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.security.max_request_bytes:
            return self._too_large(int(declared))
        return None

    def _too_large(self, size: int | None) -> list[Message]:
        limit = self.security.max_request_bytes
        return _refusal(
            413,
            "RequestTooLarge",
            f"request body of {'over ' if size is None else ''}"
            f"{size if size is not None else limit} bytes exceeds this server's limit of {limit} bytes",
        )

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        refusal = self.check(headers)
        if refusal is None and self.digests:
            scope[CREDENTIAL_SCOPE_KEY] = self.credential(headers)
        if refusal is None:
            replay, refusal = await self._read_body(receive)
        if refusal is not None:
            for message in refusal:
                await send(message)
            return
        await self.app(scope, replay, self._limited(send) if self.limit_responses else send)

    async def _read_body(self, receive: Any) -> tuple[Any, list[Message] | None]:
        """The whole body read (at most the limit), and a `receive` replaying it; or the 413 refusal."""
        body = bytearray()
        queued: deque[Message] = deque()
        while True:
            message = await receive()
            if message["type"] != "http.request":
                queued.append(message)
                break
            body.extend(message.get("body", b""))
            if len(body) > self.security.max_request_bytes:
                return receive, self._too_large(None)
            if not message.get("more_body", False):
                break
        queued.appendleft({"type": "http.request", "body": bytes(body), "more_body": False})

        async def replay() -> Message:
            return queued.popleft() if queued else await receive()

        return replay, None

    def _limited(self, send: Any) -> Any:
        """`send` holding the response back until it is whole, replaced by a 413 when it outgrows the limit."""
        limit = self.security.max_response_bytes or 0
        held: list[Message] = []
        size = 0
        refused = False

        async def guarded(message: Message) -> None:
            nonlocal size, refused
            if refused:
                return
            if message["type"] == "http.response.start":
                held.append(message)
                return
            if message["type"] != "http.response.body":
                await send(message)
                return
            size += len(message.get("body", b""))
            if size > limit:
                refused = True
                held.clear()
                for part in _refusal(
                    413,
                    "ResponseTooLarge",
                    f"the response is over this server's limit of {limit} "
                    "bytes (--max-response-bytes); the call itself did take effect",
                ):
                    await send(part)
                return
            held.append(message)
            if not message.get("more_body", False):
                for part in held:
                    await send(part)
                held.clear()

        return guarded
