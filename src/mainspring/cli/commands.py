"""The command's smaller subcommands: ``models``, ``config`` and ``new-plugin``; the prompt
read from standard input; ``--plugin MODULE[:ATTR]``."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import re
import stat
from pathlib import Path
from typing import Any, TextIO

from ..contract.errors import PluginLoadError
from ..contract.markers import implemented_hooks
from ..settings import Settings, config_path, load_settings
from .errors import usage_error

__all__ = [
    "add_commands",
    "config_command",
    "import_plugin",
    "models_command",
    "new_plugin_command",
    "read_prompt",
]

_MASK = "********"
_SECRET_KEY = re.compile(
    r"(api[_-]?key|secret|password|passwd|authorization|credential|(^|[_-])token$)", re.I
)
"""Setting keys whose values ``config`` masks (``reserve_tokens`` is not one of them)."""


def add_commands(commands: Any) -> list[argparse.ArgumentParser]:
    """Add ``models``, ``config`` and ``new-plugin``; return the parsers that build an agent
    (to which the caller adds the plugin options)."""
    models = commands.add_parser("models", help="list each provider and its known models")
    models.add_argument("--json", action="store_true", help="print JSON")
    config = commands.add_parser(
        "config", help="show the config file's path and the settings (secrets masked)"
    )
    config.add_argument("--json", action="store_true", help="print the settings as JSON")
    config.add_argument("--all", action="store_true", help="show defaults too")
    new = commands.add_parser(
        "new-plugin", help="write a new plugin package (a tool, a gate, tests) into ./NAME"
    )
    new.add_argument("name", help="its distribution name, e.g. mainspring-weather")
    new.add_argument("--directory", default=None, help="where to write it (default ./NAME)")
    return [models]


# -- --plugin ------------------------------------------------------------------------------


def import_plugin(spec: str, warn: TextIO) -> Any:
    """The plugin named by ``MODULE`` or ``MODULE:ATTR`` (as an entry point names it).

    Raises :class:`PluginLoadError` when the import or the attribute lookup fails; writes
    a warning to ``warn`` when the plugin implements no hook (it would do nothing).
    """
    module_name, _, attribute = spec.partition(":")
    try:
        plugin: Any = importlib.import_module(module_name)
        for part in attribute.split(".") if attribute else ():
            plugin = getattr(plugin, part)
    except Exception as error:
        raise PluginLoadError(
            f"--plugin {spec}: importing it failed: {type(error).__name__}: {error}",
            plugin=spec,
        ) from error
    if not implemented_hooks(plugin):
        print(
            f"mainspring: warning: --plugin {spec} implements no hook "
            "(is each hook function decorated with @mainspring.hookimpl?)",
            file=warn,
            flush=True,
        )
    return plugin


# -- the prompt ----------------------------------------------------------------------------


def read_prompt(prompt: str | None, stdin: TextIO) -> str:
    """The run's prompt: ``prompt``, with piped standard input appended after a blank line.

    Standard input is read only when it is a pipe or a file (``cat notes | mainspring run
    "summarise"``), never from a terminal. With no ``prompt``, the input is the prompt.
    Raises ``ValueError`` when there is neither.
    """
    piped = ""
    try:
        mode = os.fstat(stdin.fileno()).st_mode
        if stat.S_ISFIFO(mode) or stat.S_ISREG(mode):
            piped = stdin.read()
    except (OSError, ValueError, AttributeError):
        piped = ""  # no real standard input (closed, or replaced by a test harness)
    piped = piped.strip("\n")
    if prompt and piped:
        return f"{prompt}\n\n{piped}"
    if prompt or piped:
        return prompt or piped
    raise ValueError('no prompt: give one (mainspring run "...") or pipe it on stdin')


# -- models --------------------------------------------------------------------------------


def _served(provider: Any) -> Any:
    """What ``provider`` answers to ``list_models()`` (an OpenAI-compatible server's list),
    the error it raised, or ``None`` when it has no list to ask for or lacks a key."""
    asking = getattr(provider, "list_models", None)
    problem = getattr(provider, "credentials_problem", None)
    if asking is None or (problem is not None and problem()):
        return None

    async def ask() -> Any:
        try:
            return await asking()
        except Exception as error:  # an unreachable or odd server is reported, not fatal
            return error

    return ask()


def models_command(agent: Any, as_json: bool) -> int:
    """Each registered provider and its models (``"provider:id"``): its catalogue, and
    the models an OpenAI-compatible server lists (asked with a timeout). A provider for
    tests only (``test_only``, as the faux provider) is left out."""
    rows: list[dict[str, Any]] = []
    asked: dict[int, Any] = {}
    for name, provider in sorted(agent.providers.items()):
        row: dict[str, Any] = {"provider": name, "models": []}
        try:
            if getattr(provider, "test_only", False):
                continue
            catalogue = getattr(provider, "models", None) or {}
            missing = getattr(provider, "missing", None)
            row["models"] = [
                {
                    "id": model.id,
                    "context_window": model.context_window,
                    "max_output_tokens": model.max_output_tokens,
                    "reasoning": model.reasoning,
                    "install": missing(model.id) if callable(missing) else None,
                }
                for model in catalogue.values()
            ]
            question = _served(provider)
            if question is not None:
                asked[len(rows)] = question
        except Exception as error:  # a provider that cannot be built is reported, not fatal
            row["error"] = f"{type(error).__name__}: {error}"
        rows.append(row)
    if asked:
        answers = asyncio.run(_gathered(list(asked.values())))
        for index, answer in zip(asked, answers, strict=True):
            if isinstance(answer, BaseException):
                why = str(answer) or type(answer).__name__
                rows[index]["served_error"] = f"the server did not list its models: {why}"
            else:
                known = {model["id"] for model in rows[index]["models"]}
                rows[index]["served"] = [name for name in answer if name not in known]
    if as_json:
        print(json.dumps(rows, indent=2))
        return 0
    default = agent.state.model
    print(f"default: {default.provider}:{default.id}")
    for row in rows:
        if "error" in row:
            print(f"{row['provider']}  (unavailable: {row['error']})")
            continue
        if not row["models"] and not row.get("served"):
            print(f"{row['provider']}  (any model id: {row['provider']}:MODEL-ID)")
        for model in row["models"]:
            reasoning = ", reasoning" if model["reasoning"] else ""
            install = f"; not installed: {model['install']}" if model["install"] else ""
            print(
                f"{row['provider']}:{model['id']}  (context {model['context_window']}, "
                f"output {model['max_output_tokens']}{reasoning}{install})"
            )
        for name in row.get("served", ()):
            print(f"{row['provider']}:{name}  (listed by the server)")
        if "served_error" in row:
            print(f"{row['provider']}  ({row['served_error']})")
    return 0


async def _gathered(questions: list[Any]) -> list[Any]:
    return list(await asyncio.gather(*questions))


# -- config --------------------------------------------------------------------------------


def _masked(value: Any, key: str = "") -> Any:
    if isinstance(value, dict):
        return {k: _masked(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(v, key) for v in value]
    if value is not None and key and _SECRET_KEY.search(key):
        return _MASK
    return value


def _toml_value(value: Any) -> str:
    return json.dumps(value)  # JSON scalars and arrays are valid TOML values


def _toml(data: dict[str, Any], prefix: str = "") -> list[str]:
    """``data`` as TOML that :func:`~mainspring.settings.load_settings` reads back; TOML
    has no null, so an unset value is a comment."""
    lines = [
        f"# {k} is unset" if v is None else f"{k} = {_toml_value(v)}"
        for k, v in data.items()
        if not isinstance(v, dict)
    ]
    for key, value in data.items():
        if isinstance(value, dict):
            name = key if key.replace("_", "").replace("-", "").isalnum() else json.dumps(key)
            table = f"{prefix}.{name}" if prefix else name
            scalars = [v for v in value.values() if not isinstance(v, dict)]
            body = _toml(value, table)
            if scalars or not value:
                lines += ["", f"[{table}]"]
            lines += body
    return lines


def config_command(as_json: bool, show_all: bool) -> int:
    """Print where the config file is (or would be) and the settings it gives.

    Values of secret-looking keys (``api_key``, ``token``…, also inside ``plugin_options``
    and MCP server environments) are shown as ``********``.
    """
    path, exists = config_path()
    settings: Settings = load_settings()
    data = _masked(settings.model_dump(mode="json", exclude_defaults=not show_all))
    if as_json:
        print(json.dumps({"path": path, "exists": exists, "settings": data}, indent=2))
        return 0
    state = "" if exists else " (not found: the defaults apply)"
    print(f"# config file: {path}{state}")
    if os.environ.get("MAINSPRING_MODEL"):
        print("# default_model comes from $MAINSPRING_MODEL")
    lines = _toml(data)
    print("\n".join(lines).strip("\n") if lines else "# every setting has its default")
    return 0


# -- new-plugin ----------------------------------------------------------------------------


def new_plugin_command(name: str, directory: str | None) -> int:
    """Write the plugin package; print where, and what to do next."""
    from ..plugin_template import write_plugin

    try:
        target = write_plugin(name, Path(directory) if directory else None)
    except (ValueError, OSError) as error:
        return usage_error(error)
    print(f"wrote {target}: a tool (shout), a gate, tests and a README")
    print(f'next: pip install -e "{target}[test]" && pytest {target}')
    return 0
