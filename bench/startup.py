"""Import time, entry-point discovery and agent construction.

Import time is the wall time of a fresh ``python -c "import mainspring"`` minus a fresh
``python -c pass`` (median of the runs, interleaved); the floor imports what the floor
loop needs (``asyncio``, ``json``). Entry-point discovery is timed inside a fresh
interpreter (the first call scans every installed distribution); the floor is the
standard library's ``importlib.metadata``. Agent construction is timed in-process:
``autoload=False`` (built-ins only) and ``autoload=True`` (entry points scanned and the
installed plugins imported and registered, for every agent).
"""

from __future__ import annotations

import re
import subprocess
import sys
import time

from mainspring import Agent

from .common import Config, Row, ScriptProvider, median

__all__ = ["import_breakdown", "run_startup"]

_EP_SNIPPET = (
    "import time, {module} as m; t = time.perf_counter(); "
    "eps = m.entry_points(group='mainspring'); print(time.perf_counter() - t, len(list(eps)))"
)


def _wall(code: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - start


def _import_times(runs: int) -> tuple[float, float]:
    ms, floor, bare = [], [], []
    for _ in range(runs):
        bare.append(_wall("pass"))
        ms.append(_wall("import mainspring"))
        floor.append(_wall("import asyncio, json"))
    base = median(bare)
    return median(ms) - base, median(floor) - base


def _entry_points(module: str, runs: int) -> tuple[float, int]:
    times, found = [], 0
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-c", _EP_SNIPPET.format(module=module)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()
        times.append(float(out[0]))
        found = int(out[1])
    return median(times), found


def import_breakdown(top: int = 8) -> list[tuple[str, float]]:
    """The top-level packages that ``import mainspring`` spends the most time in (s)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import mainspring"],
        check=True,
        capture_output=True,
        text=True,
    )
    totals: dict[str, float] = {}
    for line in done.stderr.splitlines():
        found = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)", line)
        if not found:
            continue
        package = found.group(4).split(".")[0]
        totals[package] = totals.get(package, 0.0) + int(found.group(1)) / 1e6
    return sorted(totals.items(), key=lambda item: -item[1])[:top]


def _construct(autoload: bool, count: int) -> float:
    provider = ScriptProvider([])
    times = []
    for index in range(count + 1):
        start = time.perf_counter()
        Agent(model="faux:bench", provider=provider, autoload=autoload)
        if index:
            times.append(time.perf_counter() - start)
    return median(times)


def _s(value: float) -> str:
    return f"{value * 1e3:.1f} ms"


async def run_startup(config: Config) -> list[Row]:
    """Rows: import time, entry-point discovery, agent construction."""
    runs = max(config.reps, 5)
    imp, floor_imp = _import_times(runs)
    eps, found = _entry_points("importlib_metadata", runs)
    std_eps, _ = _entry_points("importlib.metadata", runs)
    count = 20 if config.quick else 100
    plain = _construct(False, count)
    autoload = _construct(True, count)
    heavy = ", ".join(f"{name} {sec * 1e3:.0f}" for name, sec in import_breakdown(4))
    return [
        Row("import mainspring (fresh process)", f"{imp:.3f} s", f"{floor_imp:.3f} s",
            imp / floor_imp, "≤0.25 s", imp <= 0.25, f"self ms: {heavy}"),
        Row("entry_points(group='mainspring')", _s(eps), _s(std_eps), eps / std_eps, "info",
            None, f"{found} entry points; floor is stdlib importlib.metadata"),
        Row("Agent() construction, autoload=False", _s(plain), "—", None, "info", None),
        Row("Agent() construction, autoload=True", _s(autoload), "—", None, "info", None,
            "scans entry points and loads installed plugins per agent"),
    ]  # fmt: skip
