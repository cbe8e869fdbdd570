"""What a server table turns into before anything starts: variables expanded, command found.

``${VAR}`` and ``${VAR:-default}`` in ``url``, ``headers`` and ``env`` values are replaced
from the process environment when the agent is built (:func:`expand_variables`); a
variable that is unset and has no default is a :class:`ValueError` naming it, so a
token never has to sit in the config file and a missing one is said plainly.

A stdio server's ``command`` is resolved before it is spawned (:func:`resolve_command`):
a bare name on the ``PATH`` the server is given (its ``env`` ``PATH``, else the
process's), then among the scripts installed beside this Python (a virtual environment's
``bin``, where ``pip install mcp-server-time`` puts its command), a relative path against
its ``cwd``. A command that is not there is a
:class:`CommandNotFound` naming the command and the directories searched.
"""

from __future__ import annotations

import os
import re
import shutil
import sysconfig
from collections.abc import Mapping

from ..settings import McpServerSettings

__all__ = ["CommandNotFound", "expand_variables", "resolve_command"]

_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class CommandNotFound(Exception):
    """A stdio server's command is not an executable file where it was looked for."""


def _expand(text: str, where: str, environ: Mapping[str, str]) -> str:
    def value(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        found = environ.get(name)
        if found is not None:
            return found
        if default is not None:
            return default
        raise ValueError(
            f"{where} uses ${{{name}}}, which is not set in the environment "
            f"(write ${{{name}:-default}} to give it a default)"
        )

    return _VARIABLE.sub(value, text)


def expand_variables(
    name: str, settings: McpServerSettings, environ: Mapping[str, str] | None = None
) -> McpServerSettings:
    """``settings`` with ``${VAR}`` expanded in ``url``, ``headers`` and ``env`` values."""
    env = os.environ if environ is None else environ
    where = f'MCP server "{name}"'
    update: dict[str, object] = {}
    if settings.url is not None:
        update["url"] = _expand(settings.url, f"{where}: url", env)
    if settings.headers:
        update["headers"] = {
            key: _expand(text, f"{where}: header {key}", env)
            for key, text in settings.headers.items()
        }
    if settings.env:
        update["env"] = {
            key: _expand(text, f"{where}: env {key}", env) for key, text in settings.env.items()
        }
    changed = {key: value for key, value in update.items() if value != getattr(settings, key)}
    return settings.model_copy(update=changed) if changed else settings


def resolve_command(settings: McpServerSettings) -> str:
    """The executable ``settings.command`` names, as an absolute path (see the module docs)."""
    command = settings.command
    assert command is not None
    if os.sep in command or (os.altsep and os.altsep in command):
        path = os.path.join(settings.cwd or os.getcwd(), os.path.expanduser(command))
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return os.path.abspath(path)
        raise CommandNotFound(f'command "{command}" is not an executable file ({path})')
    path = settings.env.get("PATH") or os.environ.get("PATH") or os.defpath
    search = os.pathsep.join((path, sysconfig.get_path("scripts")))
    found = shutil.which(command, path=search)
    if found is None:
        raise CommandNotFound(f'command "{command}" is not on its PATH ({search})')
    return os.path.abspath(found)
