"""OAuth 2.1 for MCP servers over streamable HTTP (``auth = "oauth"``).

The SDK's ``OAuthClientProvider`` (an ``httpx`` auth) does the protocol: it discovers the
authorization server, registers the client dynamically, authorizes with the authorization
code and PKCE, and refreshes the token before it expires. Tokens and the registration are
kept per server URL in the data directory (:mod:`~mainspring.mcp.oauth_storage`).

Authorizing needs a person: the authorization URL is shown by the authorization handler
(:func:`set_authorization_handler`; by default it is printed on stderr when stdin is a
terminal, and no browser is opened), and the redirect is received by a one-shot listener
on ``127.0.0.1`` (the redirect URI ``http://127.0.0.1:PORT/callback``) that answers only
a redirect carrying the ``state`` of the authorization request, for at most
:data:`AUTHORIZATION_WAIT_S` seconds. While it waits, the server's startup deadline is
paused. With no terminal and no handler the server fails with
:class:`AuthorizationRequired`, which names the command that authorizes it
(``mainspring mcp login NAME``).
"""

from __future__ import annotations

import asyncio
import html
import logging
import socket
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from urllib.parse import parse_qs, quote, urlsplit

from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.shared.auth import OAuthClientMetadata
from pydantic import AnyUrl

from ..logs import get_logger
from ..settings import McpServerSettings
from .oauth_storage import TokenFiles

__all__ = [
    "AUTHORIZATION_WAIT_S",
    "AuthorizationFailed",
    "AuthorizationHandler",
    "AuthorizationRequired",
    "describe",
    "oauth_provider",
    "on_terminal",
    "set_authorization_handler",
]

_log = get_logger(__name__)

AUTHORIZATION_WAIT_S = 300.0
"""How long the redirect of one authorization is waited for."""

_REQUEST_S = 10.0
_REQUEST_BYTES = 16 * 1024
_CALLBACK_PATH = "/callback"

AuthorizationHandler = Callable[[str, str], None]
"""``handler(server, url)`` shows the person the authorization URL of the server; called
on the MCP runtime thread, it must return at once (the redirect completes the step). It
may raise :class:`AuthorizationRequired` to refuse."""

_handler: AuthorizationHandler | None = None


class AuthorizationRequired(Exception):
    """The server needs authorizing and there is nobody to ask (stdin is not a terminal)."""

    def __init__(self, server: str) -> None:
        super().__init__(
            "needs OAuth authorization and stdin is not a terminal to ask at: run "
            f"`mainspring mcp login {server}` first"
        )


class AuthorizationFailed(Exception):
    """The authorization step could not complete (no redirect in time, a refusal, a busy
    callback port)."""


class _DescribedElsewhere(logging.Filter):
    """Drops the SDK's traceback of an authorization that could not be asked for or did
    not complete: the connection says it in a sentence."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not isinstance(error, AuthorizationRequired | AuthorizationFailed)


logging.getLogger("mcp.client.auth.oauth2").addFilter(_DescribedElsewhere())


def set_authorization_handler(handler: AuthorizationHandler | None) -> None:
    """Show authorization URLs with ``handler`` from now on (``None``: the terminal, see
    the module)."""
    global _handler
    _handler = handler


def on_terminal(server: str, url: str) -> None:
    """The default handler: print the URL on stderr when stdin is a terminal, else refuse."""
    if not _at_terminal():
        raise AuthorizationRequired(server)
    print(
        f'MCP server "{server}" needs authorization: open this address in a browser '
        f"(waiting up to {AUTHORIZATION_WAIT_S:.0f} s):\n  {url}",
        file=sys.stderr,
        flush=True,
    )


def _at_terminal() -> bool:
    return sys.stdin is not None and sys.stdin.isatty()


def oauth_provider(
    name: str, settings: McpServerSettings, paused: Callable[[], AbstractContextManager[None]]
) -> OAuthClientProvider:
    """The ``httpx`` auth of the server ``name``; ``paused()`` holds its startup deadline
    while a person is waited for. :class:`AuthorizationFailed` when there is no data
    directory to keep tokens in."""
    assert settings.url is not None
    try:
        storage = TokenFiles(settings.url)
    except ValueError:
        raise AuthorizationFailed(
            "there is no data directory to keep its tokens in (set MAINSPRING_DATA_DIR, "
            "XDG_DATA_HOME or HOME)"
        ) from None
    redirect = _redirect_uri(settings.redirect_port, storage.stored_redirect_uri())
    storage.redirect_uri = redirect
    callback = _Callback(name, redirect, paused)
    metadata = OAuthClientMetadata(
        redirect_uris=[AnyUrl(redirect)],
        client_name=settings.oauth_client_name,
        scope=" ".join(settings.oauth_scopes) or None,
        token_endpoint_auth_method="none",
        grant_types=["authorization_code", "refresh_token"],
    )
    provider = OAuthClientProvider(
        settings.url,
        metadata,
        storage,
        redirect_handler=callback.show,
        callback_handler=callback.wait,
    )
    # the SDK keeps a loaded token's expiry only in memory: give it the stored one, so an
    # expired token is refreshed before it is sent rather than after a 401
    provider.context.token_expiry_time = storage.expires_at()
    return provider


def _redirect_uri(port: int | None, stored: str | None) -> str:
    """``http://127.0.0.1:PORT/callback``: ``port``, else the stored registration's, else a
    free one (registered, and kept with the registration)."""
    if port is None and stored is not None:
        parts = urlsplit(stored)
        try:
            kept = parts.port
        except ValueError:  # not a port: register again
            kept = None
        if parts.hostname == "127.0.0.1" and parts.path == _CALLBACK_PATH and kept:
            return f"http://127.0.0.1:{kept}{_CALLBACK_PATH}"
    if port is None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
    return f"http://127.0.0.1:{port}{_CALLBACK_PATH}"


def _printable(url: str) -> str:
    """``url`` with every character but printable ASCII percent-encoded (the authorization
    endpoint is the server's: it never gets to write a control character to a terminal)."""
    return "".join(char if " " < char < "\x7f" else quote(char, safe="") for char in url)


class _Callback:
    """The one-shot loopback listener of one authorization."""

    def __init__(
        self, server: str, redirect: str, paused: Callable[[], AbstractContextManager[None]]
    ) -> None:
        self.server = server
        self.port = urlsplit(redirect).port or 80
        self.paused = paused
        self._state: str | None = None
        self._result: asyncio.Future[AuthorizationCodeResult] | None = None
        self._listener: asyncio.Server | None = None

    async def show(self, url: str) -> None:
        """Listen for the redirect, then show ``url`` (the SDK's redirect handler)."""
        handler = _handler or on_terminal
        if handler is on_terminal and not _at_terminal():  # refused before listening
            raise AuthorizationRequired(self.server)
        states = parse_qs(urlsplit(url).query).get("state")
        self._state = states[0] if states else None
        self._result = asyncio.get_running_loop().create_future()
        try:
            self._listener = await asyncio.start_server(
                self._answer, "127.0.0.1", self.port, limit=_REQUEST_BYTES
            )
        except OSError as error:
            raise AuthorizationFailed(
                f"cannot receive the authorization redirect on 127.0.0.1:{self.port} "
                f"({error.strerror or error}); set redirect_port to a free port"
            ) from None
        try:
            handler(self.server, _printable(url))
        except BaseException:
            self._close()
            raise
        _log.info("mcp_oauth_authorization_asked", server=self.server, port=self.port)

    async def wait(self) -> AuthorizationCodeResult:
        """The redirect's code (the SDK's callback handler)."""
        assert self._result is not None
        try:
            with self.paused():
                async with asyncio.timeout(AUTHORIZATION_WAIT_S):
                    return await self._result
        except TimeoutError:
            raise AuthorizationFailed(
                f"no authorization redirect arrived within {AUTHORIZATION_WAIT_S:.0f} s"
            ) from None
        finally:
            self._close()

    def _close(self) -> None:
        if self._listener is not None:
            self._listener.close()
            self._listener = None

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(_REQUEST_S):
                head = await reader.readuntil(b"\r\n\r\n")
            status, text = self._handle(head.split(b"\r\n", 1)[0].decode("latin-1"))
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError):
            status, text = 400, "Bad request."
        body = f"<!doctype html><title>mainspring</title><p>{html.escape(text)}</p>\n".encode()
        writer.write(
            f"HTTP/1.1 {status} {'OK' if status == 200 else 'Error'}\r\n"
            "Content-Type: text/html; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            + body
        )
        try:
            await writer.drain()
            writer.close()
            await writer.wait_closed()
        except OSError:
            pass

    def _handle(self, request_line: str) -> tuple[int, str]:
        """Resolve the authorization on a redirect carrying its state; the page's status
        and text."""
        parts = request_line.split(" ")
        if len(parts) != 3 or parts[0] != "GET":
            return 400, "Bad request."
        target = urlsplit(parts[1])
        query = {key: values[0] for key, values in parse_qs(target.query).items()}
        if target.path != _CALLBACK_PATH or not self._state or query.get("state") != self._state:
            return 404, "Not an authorization redirect of this client."
        result = self._result
        if result is None or result.done():
            return 400, "This authorization is over."
        error = query.get("error")
        if error is not None:
            why = query.get("error_description", "")
            result.set_exception(
                AuthorizationFailed(f"the authorization server refused: {error} {why}".strip())
            )
            return 200, "Authorization refused. You can close this page."
        if not query.get("code"):
            return 400, "The redirect carries no code."
        result.set_result(
            AuthorizationCodeResult(code=query["code"], state=query["state"], iss=query.get("iss"))
        )
        return (
            200,
            f'mainspring is authorized for the MCP server "{self.server}". You may close this.',
        )


def describe(error: BaseException) -> str | None:
    """The sentence for an authorization failure, or ``None`` for another error."""
    from mcp.client.auth import OAuthFlowError, OAuthRegistrationError, OAuthTokenError

    if isinstance(error, AuthorizationRequired):
        return str(error)
    if isinstance(error, AuthorizationFailed | OAuthFlowError | OAuthTokenError):
        return f"could not be authorized: {error}"
    if isinstance(error, OAuthRegistrationError):
        return f"could not register for authorization: {error}"
    return None
