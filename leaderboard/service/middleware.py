"""ASGI middleware around the leaderboard app: security headers' values, the body limit (413),
the token checked before an upload is read (401), HEAD answered as GET."""
from __future__ import annotations

import json
from typing import Any

from starlette.concurrency import run_in_threadpool

from leaderboard.service.auth import TOKEN_REQUIRED, authenticate, bearer_token

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
       "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
SECURITY_HEADERS = {"content-security-policy": CSP, "x-content-type-options": "nosniff",
                    "referrer-policy": "no-referrer", "x-frame-options": "DENY"}
#: what a multipart form may add to the uploads' bytes
FORM_OVERHEAD = 1 << 20
CHALLENGE = {"www-authenticate": "Bearer"}


async def send_json(send, status: int, document: Any, headers: dict | None = None) -> None:
    """A whole JSON response, with the security headers, sent straight through ASGI."""
    fields = {"content-type": "application/json", **SECURITY_HEADERS, **(headers or {})}
    await send({"type": "http.response.start", "status": status,
                "headers": [(k.encode(), v.encode()) for k, v in fields.items()]})
    await send({"type": "http.response.body", "body": json.dumps(document).encode()})


class BodyLimit:
    """ASGI middleware: 413 for a request body over `limit` bytes, declared or streamed
    (chunked); `upload_limit` is the instance's upload limit the message names."""

    def __init__(self, app, limit: int, upload_limit: int):
        self.app, self.limit, self.upload_limit = app, limit, upload_limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or {}).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            return await self._refuse(send)
        received, refused = 0, False

        async def limited_receive():
            nonlocal received, refused
            message = await receive()
            received += len(message.get("body", b""))
            if received > self.limit:
                refused = True
                raise _TooLarge()
            return message

        async def guarded_send(message):  # the app's answer to a body it could not parse
            if not refused:
                await send(message)

        try:
            await self.app(scope, limited_receive, guarded_send)
        except _TooLarge:
            pass
        if refused:
            await self._refuse(send)

    async def _refuse(self, send) -> None:
        await send_json(send, 413, {"status": "rejected", "errors": [
            {"file": None, "line": None, "field": None,
             "message": f"request body over {self.limit} bytes (uploads may total "
                        f"{self.upload_limit} bytes on this instance)"}]})


class HeadAsGet:
    """ASGI middleware: HEAD answered as GET without the body (link checkers, monitors)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "HEAD":
            return await self.app(scope, receive, send)

        async def headers_only(message):
            if message["type"] == "http.response.body":
                message = {**message, "body": b""}
            await send(message)

        await self.app({**scope, "method": "GET"}, receive, headers_only)


class _TooLarge(Exception):
    pass


class TokenFirst:
    """ASGI middleware: a request to one of `routes` ((method, path) pairs that need a token)
    without a valid token is answered 401 before its body is read, so an anonymous client
    cannot make the server parse and spool an upload (the form binding would read it all
    first); one with several Authorization headers, 400 (which one is meant is ambiguous).
    The route still authenticates as before."""

    def __init__(self, app, database, routes: set[tuple[str, str]]):
        self.app, self.database, self.routes = app, database, routes

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and (scope["method"], route_path(scope)) in self.routes:
            headers = [value for name, value in scope.get("headers") or ()
                       if name == b"authorization"]  # names come lower-case
            if len(headers) > 1:  # the route would read the first, a proxy maybe the last
                return await send_json(send, 400, {
                    "detail": f"{len(headers)} Authorization headers: send one"})
            token = bearer_token(headers[0].decode("latin-1") if headers else None)
            if await run_in_threadpool(authenticate, self.database, token) is None:
                return await send_json(send, 401, {"detail": TOKEN_REQUIRED}, CHALLENGE)
        return await self.app(scope, receive, send)


def route_path(scope) -> str:
    """The path the router matches: the request's path without the `root_path` a proxy
    prefix (or a mount) puts in front of it."""
    path, root = scope["path"], scope.get("root_path", "")
    if root and path.startswith(root) and (path == root or path[len(root)] == "/"):
        return path[len(root):] or "/"
    return path
