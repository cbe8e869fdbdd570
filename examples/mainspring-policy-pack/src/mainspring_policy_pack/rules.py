"""The gate rules: the workspace sandbox for path arguments, shell deny rules, and the
ask rules of both (a call that needs a person's approval).

They follow what a tool declares (its effects and its arguments' roles, see
:mod:`mainspring.effects`, with the policy's ``[policy.tools.NAME]`` laid over), never a
tool's or an argument's name: the sandbox checks every ``path``/``paths`` argument of any
tool, the command rules every ``command`` argument of a tool whose effect is ``execute``.
They look at the *validated* arguments the tool will run with (a pydantic model instance
for ``@tool`` functions, a dict for JSON-Schema tools); a role names an argument as the
model writes it (a field's name or its alias). Each returns the reason for its decision,
or ``None``; the plugin turns a deny reason into ``Block`` and an ask reason into ``Ask``,
and checks every deny rule before any ask rule, so a call that a deny rule matches is
blocked whatever an ask rule says. The information-flow rules are in :mod:`.flows`.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from .config import Policy

__all__ = [
    "arguments",
    "command_rules",
    "path_problem",
    "path_question",
    "path_violation",
]

_SHOWN = 120
"""Characters of a matched command shown in an ask reason."""


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


_PATH_ROLES = frozenset({"path", "paths"})


def _paths(roles: Mapping[str, str], args: Any) -> Iterator[tuple[str, str]]:
    """``(argument name, path)`` for every argument whose role is ``path`` or ``paths``
    (a string, a path, or a list of them)."""
    for name, value in arguments(args):
        if roles.get(name) not in _PATH_ROLES:
            continue
        values = value if isinstance(value, list | tuple) else [value]
        for item in values:
            if isinstance(item, os.PathLike):
                item = os.fspath(item)
            if isinstance(item, str):
                yield name, item


def path_violation(policy: Policy, roles: Mapping[str, str], args: Any) -> str | None:
    """The Block reason for the first path argument that leaves the workspace."""
    for name, item in _paths(roles, args):
        problem = path_problem(item, policy.workspace)
        if problem:
            return f"sandbox: path argument {name!r} ({item!r}) {problem}"
    return None


def _relative(path: str, root: str) -> str:
    """``path`` relative to ``root``, ``/``-separated; ``.`` for ``root`` itself."""
    relative = os.path.relpath(path, root)
    return relative if os.sep == "/" else relative.replace(os.sep, "/")


def workspace_spellings(value: str, workspace: Path) -> list[str]:
    """The workspace-relative spellings of ``value`` (a path inside the workspace): as
    written but lexically normalised (``./a/./b/../c`` is ``a/c``, the workspace itself
    ``.``), and resolved through symlinks, when that differs."""
    root = os.fspath(workspace)
    given = Path(value)
    joined = given if given.is_absolute() else workspace / given
    spellings = [_relative(os.path.normpath(joined), root)]
    resolved = _relative(os.path.realpath(joined), root)
    if resolved not in spellings:
        spellings.append(resolved)
    return spellings


def path_question(
    policy: Policy, tool_name: str, roles: Mapping[str, str], args: Any
) -> str | None:
    """The Ask reason of the first path ask rule that applies to ``tool_name`` and to one
    of its path arguments, or ``None``. A path is taken relative to the workspace, both as
    written and resolved through symlinks; a ``"matches"`` rule asks when either spelling
    matches, a ``"does-not-match"`` rule when either does not (so a symlink can neither
    hide a path from a rule nor smuggle one past it). Call it only for calls
    :func:`path_violation` allowed: their paths are inside the workspace."""
    rules = [r for r in policy.path_ask_rules if r.tools is None or tool_name in r.tools]
    if not rules:
        return None
    for name, item in _paths(roles, args):
        spellings = [
            s.encode("utf-8", "surrogatepass") for s in workspace_spellings(item, policy.workspace)
        ]
        for rule in rules:
            found = [rule.regex.search(spelling) is not None for spelling in spellings]
            if rule.when == "matches" and any(found):
                shown = spellings[found.index(True)].decode("utf-8", "replace")
                how = f"{shown!r} matches its pattern"
            elif rule.when == "does-not-match" and not all(found):
                shown = spellings[found.index(False)].decode("utf-8", "replace")
                how = f"{shown!r} does not match its pattern"
            else:
                continue
            return (
                f"path argument {name!r} ({item!r}) needs approval by rule {rule.name!r}: "
                f"{rule.reason} ({how})"
            )
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


def _shown(matched: bytes) -> str:
    text = " ".join(matched.decode("utf-8", "replace").split())
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"


def command_rules(
    policy: Policy, effects: frozenset[str], roles: Mapping[str, str], args: Any
) -> tuple[str | None, str | None]:
    """``(deny reason, ask reason)`` for a call: the reason of the first deny rule that
    matches one of its commands, else ``None`` and the reason of the first ask rule that
    does (naming the rule and the text it matched), else ``(None, None)``; always that
    for a tool whose effects do not include ``execute``. Its commands are its ``command``
    arguments; a tool with none declared has every string argument checked. Each command
    is checked as written and in its normalised variants (see :func:`_variants`). The
    rules are RE2 patterns, so this takes time linear in the length of the commands."""
    if "execute" not in effects:
        return None, None
    pairs = list(arguments(args))
    commands = [v for k, v in pairs if roles.get(k) == "command" and isinstance(v, str)]
    if not commands:  # no command argument declared: check every string
        commands = [value for _, value in pairs if isinstance(value, str)]
    # encoded once per variant: RE2 would otherwise encode the text for every rule
    encoded = [
        [variant.encode("utf-8", "surrogatepass") for variant in _variants(command)]
        for command in commands
    ]
    for variants in encoded:
        for rule in policy.deny_rules:
            if any(rule.regex.search(variant) is not None for variant in variants):
                return f"shell command denied by rule {rule.name!r}: {rule.reason}", None
    for variants in encoded:
        for ask in policy.ask_rules:
            for variant in variants:
                match = ask.regex.search(variant)
                if match is not None:
                    return None, (
                        f"shell command needs approval by rule {ask.name!r}: {ask.reason} "
                        f"(matched {_shown(match.group(0))!r})"
                    )
    return None, None
