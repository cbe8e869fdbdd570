"""Reading a tool function's docstring: its summary and what it says of each parameter.

Google (``Args:``), NumPy (``Parameters`` with an underline) and reST (``:param x:``)
styles are understood; ``@tool`` turns the result into the tool's description and the
descriptions of its parameters.
"""

from __future__ import annotations

import inspect
import re
from typing import Final

__all__ = ["parse_docstring"]

_GOOGLE_HEADER: Final = re.compile(
    r"^(?:args|arguments|parameters|params|keyword args|keyword arguments|kwargs"
    r"|other parameters)\s*:\s*$",
    re.IGNORECASE,
)
_GOOGLE_ENTRY: Final = re.compile(
    r"^(?P<name>\*{0,2}[A-Za-z_]\w*)\s*(?:\((?P<type>.*?)\))?\s*:(?:\s*(?P<text>.*))?$"
)
_NUMPY_HEADER: Final = re.compile(r"^(?:parameters|other parameters)$", re.IGNORECASE)
_NUMPY_UNDERLINE: Final = re.compile(r"^\s*-{3,}\s*$")
_NUMPY_ENTRY: Final = re.compile(
    r"^(?P<names>\*{0,2}[A-Za-z_]\w*(?:\s*,\s*\*{0,2}[A-Za-z_]\w*)*)\s*(?::\s*(?P<type>.*))?$"
)
_REST_PARAM: Final = re.compile(
    r"^:(?:param|parameter|arg|argument|key|keyword)\s+(?:(?P<type>[^:]+?)\s+)?"
    r"(?P<name>\*{0,2}[A-Za-z_]\w*)\s*:(?P<text>.*)$"
)
_REST_TYPE: Final = re.compile(r"^:type\s+\*{0,2}[A-Za-z_]\w*\s*:")


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Split a (cleaned) docstring into its description and per-parameter descriptions.

    The description is the docstring with every parameter section removed (Google,
    NumPy or reST style, see the module docs), stripped, with runs of blank lines
    collapsed to one. Parameter descriptions join their lines with single spaces; a
    parameter documented without text is left out.
    """
    lines = inspect.cleandoc(doc).splitlines() if doc else []
    kept: list[str] = []
    documented: dict[str, str] = {}
    index = 0
    while index < len(lines):
        line = lines[index]
        stripped = line.strip()
        indent = _indent(line)
        if (
            _NUMPY_HEADER.match(stripped)
            and index + 1 < len(lines)
            and _NUMPY_UNDERLINE.match(lines[index + 1])
        ):
            index = _numpy_section(lines, index + 2, indent, documented)
        elif _GOOGLE_HEADER.match(stripped):
            index = _google_section(lines, index + 1, indent, documented)
        elif _REST_PARAM.match(stripped) or _REST_TYPE.match(stripped):
            index = _rest_field(lines, index, indent, documented)
        else:
            kept.append(line)
            index += 1
    description = re.sub(r"\n\s*\n(?:\s*\n)+", "\n\n", "\n".join(kept)).strip()
    return description, documented


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _record(documented: dict[str, str], names: list[str], parts: list[str]) -> None:
    text = " ".join(part for part in parts if part)
    if not text:
        return
    for name in names:
        documented[name.lstrip("*")] = text


def _google_section(
    lines: list[str], start: int, header_indent: int, documented: dict[str, str]
) -> int:
    """Read entries indented under a Google header; return the index after the section."""
    entry_indent: int | None = None
    names: list[str] = []
    parts: list[str] = []
    end = start
    index = start
    while index < len(lines):
        line = lines[index]
        if not line.strip():
            index += 1
            continue
        indent = _indent(line)
        if indent <= header_indent:
            break
        if entry_indent is None:
            entry_indent = indent
        entry = _GOOGLE_ENTRY.match(line.strip()) if indent <= entry_indent else None
        if entry:
            _record(documented, names, parts)
            names, parts = [entry["name"]], [(entry["text"] or "").strip()]
        else:
            parts.append(line.strip())
        index += 1
        end = index
    _record(documented, names, parts)
    return end


def _numpy_section(
    lines: list[str], start: int, header_indent: int, documented: dict[str, str]
) -> int:
    """Read ``name : type`` entries after a NumPy header's underline; the section ends
    at the next underlined header or at a header-level line that is not an entry."""
    names: list[str] = []
    parts: list[str] = []
    end = start
    index = start
    while index < len(lines):
        line = lines[index]
        stripped = line.strip()
        if not stripped:
            index += 1
            continue
        indent = _indent(line)
        if indent <= header_indent:
            if index + 1 < len(lines) and _NUMPY_UNDERLINE.match(lines[index + 1]):
                break
            entry = _NUMPY_ENTRY.match(stripped)
            if entry is None:
                break
            _record(documented, names, parts)
            names = [name.strip() for name in entry["names"].split(",")]
            parts = []
        else:
            parts.append(stripped)
        index += 1
        end = index
    _record(documented, names, parts)
    return end


def _rest_field(lines: list[str], start: int, indent: int, documented: dict[str, str]) -> int:
    """Read one ``:param ...:`` (recorded) or ``:type ...:`` (dropped) field and its
    more-indented continuation lines; return the index after it."""
    first = lines[start].strip()
    index = start + 1
    parts = []
    while index < len(lines) and lines[index].strip() and _indent(lines[index]) > indent:
        parts.append(lines[index].strip())
        index += 1
    param = _REST_PARAM.match(first)
    if param:
        _record(documented, [param["name"]], [param["text"].strip(), *parts])
    return index
