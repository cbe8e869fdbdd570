"""The two gate rules: the workspace sandbox for path arguments, and shell deny rules.

Both look at the *validated* arguments the tool will run with (a pydantic model instance
for ``@tool`` functions, a dict for JSON-Schema tools), by argument name: a field's name or
its alias.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from .config import Policy

__all__ = ["arguments", "command_violation", "path_problem", "path_violation"]


def arguments(args: Any) -> Iterator[tuple[str, Any]]:
    """``(name, value)`` for each argument; a model field is yielded under its name and,
    if it has one, under its alias (the name the model used)."""
    if isinstance(args, BaseModel):
        for field_name, info in type(args).model_fields.items():
            value = getattr(args, field_name, None)
            yield field_name, value
            if info.alias and info.alias != field_name:
                yield info.alias, value
    elif isinstance(args, dict):
        yield from args.items()


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def path_problem(value: str, workspace: Path) -> str | None:
    """Why ``value`` (a path a tool will use) leaves ``workspace``, or ``None`` if it does
    not. Relative paths are relative to the workspace."""
    if value.startswith("~"):
        return "is a home-directory (~) path, outside the workspace"
    if "\x00" in value:
        return "contains a NUL byte"
    root = os.fspath(workspace)
    given = Path(value)
    joined = given if given.is_absolute() else workspace / given
    real = os.path.realpath(joined)
    if _inside(real, root):
        return None
    lexical = os.path.normpath(joined)
    if given.is_absolute() and not _inside(lexical, root):
        return f"is an absolute path outside the workspace {root}"
    if not given.is_absolute() and not _inside(lexical, root):
        return f"climbs out of the workspace {root} with '..'"
    return f"resolves through a symlink to {real}, outside the workspace {root}"


def path_violation(policy: Policy, args: Any) -> str | None:
    """The Block reason for the first path argument that leaves the workspace."""
    for name, value in arguments(args):
        if name not in policy.path_arguments:
            continue
        values = value if isinstance(value, list | tuple) else [value]
        for item in values:
            if isinstance(item, os.PathLike):
                item = os.fspath(item)
            if not isinstance(item, str):
                continue
            problem = path_problem(item, policy.workspace)
            if problem:
                return f"sandbox: path argument {name!r} ({item!r}) {problem}"
    return None


_UNQUOTE = str.maketrans("", "", "\"'\\")
_IFS = re.compile(r"\$\{?IFS\}?")  # cannot backtrack: linear in the text


def _resolve_parents(word: str) -> str:
    """``word`` with ``name/..`` resolved if it is an absolute (or ``~``) path."""
    home = word.startswith("~/")
    if "/.." not in word or not (home or word.startswith("/")):
        return word
    body = word[1:] if home else word
    normal = posixpath.normpath(body)
    if body.endswith(("/", "/..")) and normal != "/":
        normal += "/"
    return ("~" if home else "") + normal


def _normalised(plain: str) -> str:
    """``plain`` with ``//`` collapsed, ``/./`` and a trailing ``/.`` dropped, and
    ``name/..`` resolved in absolute paths: ``/tmp/../`` and ``/./`` become ``/``."""
    text = plain
    for run, single in (("//", "/"), ("/./", "/")):
        while run in text:  # each pass at least halves the runs: O(n log n) at worst
            text = text.replace(run, single)
    for end in " ;&|)":
        text = text.replace("/." + end, "/" + end)
    if text.endswith("/."):
        text = text[:-1]
    if "/.." in text:
        text = " ".join([_resolve_parents(word) for word in text.split(" ")])
    return text


def _variants(command: str) -> list[str]:
    """The command as written; with quoting removed and whitespace collapsed (so
    ``"r""m" -rf /`` or ``sudo${IFS}ls`` are seen for what they run); and that with its
    absolute paths normalised (:func:`_normalised`). Each step is linear in the command's
    length."""
    plain = command.translate(_UNQUOTE)
    if "IFS" in plain:
        plain = _IFS.sub(" ", plain)
    plain = " ".join(plain.split())
    variants = [command]
    if plain != command:
        variants.append(plain)
    if "//" in plain or "/." in plain:
        normal = _normalised(plain)
        if normal != plain:
            variants.append(normal)
    return variants


def command_violation(policy: Policy, tool_name: str, args: Any) -> str | None:
    """The Block reason if ``tool_name`` is a shell tool and a deny rule matches one of
    its commands. The rules are RE2 patterns, so this takes time linear in the length of
    the commands."""
    if tool_name not in policy.shell_tools:
        return None
    pairs = list(arguments(args))
    commands = [v for k, v in pairs if k in policy.command_arguments and isinstance(v, str)]
    if not commands:  # a shell tool with an unexpected schema: check every string
        commands = [value for _, value in pairs if isinstance(value, str)]
    for command in commands:
        # encoded once per variant: RE2 would otherwise encode the text for every rule
        encoded = [variant.encode("utf-8", "surrogatepass") for variant in _variants(command)]
        for rule in policy.deny_rules:
            if any(rule.regex.search(variant) is not None for variant in encoded):
                return f"shell command denied by rule {rule.name!r}: {rule.reason}"
    return None
