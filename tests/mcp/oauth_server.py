"""A test MCP server over streamable HTTP that requires OAuth 2.1, its own authorization
server included (the SDK's ``mcp.server.auth`` routes on an in-memory provider).

Run as ``python oauth_server.py --http PORT [--log FILE]``. The provider approves every
authorization request at once (the redirect carries the code), registers any client
(dynamic client registration), issues access tokens valid for an hour with a refresh
token, and rotates both on refresh. ``--log FILE`` appends one line per grant
(``register``, ``authorize``, ``token authorization_code``, ``token refresh_token``) so
tests can see what the client did. The tool ``forget_tokens`` forgets every access token
issued, so the client's next request is refused. Everything is forgotten when the process ends.
"""

from __future__ import annotations

import argparse
import secrets
import time

from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

parser = argparse.ArgumentParser()
parser.add_argument("--http", type=int, required=True)
parser.add_argument("--log", default=None)
options = parser.parse_args()
BASE = f"http://127.0.0.1:{options.http}"
LIFETIME_S = 3600


def log(line: str) -> None:
    if options.log:
        with open(options.log, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")


class ApprovingProvider:
    """An authorization server that says yes to everyone, keeping all it issued in memory."""

    def __init__(self) -> None:
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info
        log("register")

    async def authorize(
        self, client: OAuthClientInformationFull, params: AuthorizationParams
    ) -> str:
        assert client.client_id is not None
        code = secrets.token_urlsafe(24)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [],
            expires_at=time.time() + 300,
            client_id=client.client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        log("authorize")
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        return self.codes.get(authorization_code)

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        del self.codes[authorization_code.code]
        log("token authorization_code")
        return self._issue(authorization_code.client_id, authorization_code.scopes)

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> RefreshToken | None:
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        del self.refresh[refresh_token.token]
        log("token refresh_token")
        return self._issue(refresh_token.client_id, scopes or refresh_token.scopes)

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        if found is None or (found.expires_at is not None and found.expires_at < time.time()):
            return None
        return found

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)

    def _issue(self, client_id: str, scopes: list[str]) -> OAuthToken:
        access, refresh = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        expires_at = int(time.time()) + LIFETIME_S
        self.access[access] = AccessToken(
            token=access, client_id=client_id, scopes=scopes, expires_at=expires_at
        )
        self.refresh[refresh] = RefreshToken(token=refresh, client_id=client_id, scopes=scopes)
        return OAuthToken(
            access_token=access,
            expires_in=LIFETIME_S,
            refresh_token=refresh,
            scope=" ".join(scopes) or None,
        )


provider = ApprovingProvider()
server = MCPServer(
    "oauth-test",
    auth_server_provider=provider,
    auth=AuthSettings(
        issuer_url=BASE,  # type: ignore[arg-type]
        resource_server_url=f"{BASE}/mcp",  # type: ignore[arg-type]
        validate_token_resource=False,
        client_registration_options=ClientRegistrationOptions(enabled=True),
        required_scopes=[],
    ),
)


@server.tool()
def echo(text: str) -> str:
    """Repeat text."""
    return text


@server.tool()
def forget_tokens() -> str:
    """Forget every access token issued (as a revocation would): the next request is 401."""
    provider.access.clear()
    return "forgotten"


if __name__ == "__main__":
    server.run("streamable-http", host="127.0.0.1", port=options.http)
