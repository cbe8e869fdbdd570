"""Rendering: the results table (plain text or Markdown) and a description of the machine."""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Sequence

from .common import Row

__all__ = ["machine", "render"]

_HEADERS = ("workload", "mainspring", "floor", "ratio", "target", "result", "note")


def _cells(row: Row) -> tuple[str, ...]:
    ratio = "—" if row.ratio is None else f"{row.ratio:.1f}×"
    result = {True: "pass", False: "MISS", None: "—"}[row.passed]
    return (row.workload, row.value, row.floor, ratio, row.target, result, row.note)


def render(rows: Sequence[Row], markdown: bool = False) -> str:
    """The table; ``ratio`` is mainspring's cost over the floor's (higher = slower)."""
    lines = [_HEADERS, *(_cells(row) for row in rows)]
    if markdown:
        out = ["| " + " | ".join(_HEADERS) + " |", "|" + "---|" * len(_HEADERS)]
        out += ["| " + " | ".join(cells) + " |" for cells in lines[1:]]
        return "\n".join(out)
    widths = [max(len(cells[i]) for cells in lines) for i in range(len(_HEADERS))]
    text = ["  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True))
            for cells in lines]  # fmt: skip
    text.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(line.rstrip() for line in text)


def _cpu() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def machine() -> str:
    """One line: CPU, cores, OS, Python."""
    return (
        f"{_cpu()}, {os.cpu_count()} cores; {platform.system()} {platform.release()}; "
        f"Python {sys.version.split()[0]} ({platform.python_implementation()})"
    )
