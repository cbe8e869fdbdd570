"""Where the OAuth tokens and client registration of an MCP server are kept.

One pair of files per server URL in ``DATA/mcp-oauth/`` (the data directory, which the
coding tools' sandbox hides from ``bash``; asked for strictly: a process whose environment
names none finds no tokens): ``<digest>.tokens.json`` (the token, and when the access
token expires) and ``<digest>.client.json`` (the registration), ``<digest>`` naming the
URL. Files are
``0600`` in a ``0700`` directory, each written whole to a temporary file and renamed over
the old one. Each records its URL; a file that cannot be read, is not JSON of the expected
shape, is too large or names another URL is logged and taken as absent, so the server is
authorized again rather than the agent failing.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import ValidationError

from ..data_directory import data_dir
from ..logs import get_logger

__all__ = ["TokenFiles", "token_directory"]

_log = get_logger(__name__)
_MAX_BYTES = 256 * 1024


def token_directory() -> Path:
    """``DATA/mcp-oauth``; ``ValueError`` when the environment names no data directory."""
    return data_dir(strict=True) / "mcp-oauth"


class TokenFiles:
    """The SDK's ``TokenStorage`` for one server URL, in files (see the module).

    ``redirect_uri``, when given, is the one the client will use: a stored registration
    made for another one is taken as absent (the client registers again).
    """

    def __init__(
        self, url: str, directory: Path | None = None, redirect_uri: str | None = None
    ) -> None:
        self.url = url
        self.directory = token_directory() if directory is None else directory
        self.redirect_uri = redirect_uri
        stem = hashlib.sha256(url.encode()).hexdigest()[:32]
        self.tokens_path = self.directory / f"{stem}.tokens.json"
        self.client_path = self.directory / f"{stem}.client.json"

    async def get_tokens(self) -> OAuthToken | None:
        record = self._read(self.tokens_path)
        return None if record is None else self._parse(self.tokens_path, OAuthToken, record)

    def expires_at(self) -> float | None:
        """When the stored access token expires (seconds since the epoch), if known."""
        record = self._read(self.tokens_path)
        value = None if record is None else record.get("expires_at")
        return float(value) if isinstance(value, int | float) else None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        expires = None if tokens.expires_in is None else time.time() + tokens.expires_in
        self._write(self.tokens_path, tokens.model_dump(mode="json"), expires_at=expires)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        record = self._read(self.client_path)
        if record is None:
            return None
        info: OAuthClientInformationFull | None
        info = self._parse(self.client_path, OAuthClientInformationFull, record)
        uris = [] if info is None else [str(uri) for uri in info.redirect_uris or ()]
        if self.redirect_uri is not None and self.redirect_uri not in uris:
            return None  # registered for another callback: register again
        return info

    def stored_redirect_uri(self) -> str | None:
        """The first redirect URI of the stored registration, if there is one."""
        record = self._read(self.client_path)
        info = None if record is None else record.get("value", {}).get("redirect_uris")
        return str(info[0]) if isinstance(info, list) and info else None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self._write(self.client_path, client_info.model_dump(mode="json", exclude_none=True))

    def forget_tokens(self) -> None:
        """Remove the stored token (the registration stays)."""
        self.tokens_path.unlink(missing_ok=True)

    def _read(self, path: Path) -> dict[str, Any] | None:
        try:
            with open(path, "rb") as handle:
                data = handle.read(_MAX_BYTES + 1)
        except FileNotFoundError:
            return None
        except OSError as error:
            return self._ignored(path, f"cannot be read: {error}")
        if len(data) > _MAX_BYTES:
            return self._ignored(path, f"is larger than {_MAX_BYTES} bytes")
        try:
            record = json.loads(data)
        except ValueError as error:
            return self._ignored(path, f"is not JSON: {error}")
        if not isinstance(record, dict) or not isinstance(record.get("value"), dict):
            return self._ignored(path, "is not an object with a value")
        if record.get("url") != self.url:
            return self._ignored(path, "was written for another server URL")
        return record

    def _parse(self, path: Path, model: Any, record: dict[str, Any]) -> Any:
        try:
            return model.model_validate(record["value"])
        except ValidationError as error:
            return self._ignored(path, f"does not hold what it should: {error.errors()[0]['msg']}")

    @staticmethod
    def _ignored(path: Path, why: str) -> None:
        _log.warning("mcp_oauth_file_ignored", path=str(path), reason=why)
        return None

    def _write(self, path: Path, value: dict[str, Any], **extra: Any) -> None:
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.directory.chmod(0o700)  # the umask, or an older directory, may allow more
        record = {"url": self.url, "value": value, **extra}
        descriptor, temporary = tempfile.mkstemp(dir=self.directory, prefix=".", suffix=".tmp")
        try:
            with os.fdopen(descriptor, "w", encoding="utf-8") as handle:  # mkstemp: 0600
                json.dump(record, handle)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
