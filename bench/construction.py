"""``python -m bench.construction single|N``: what building agents costs, alone.

``single``: the first ``Agent()`` of the process, then the median of 100 constructions
with ``autoload=False`` and with ``autoload=True``, and whether the local provider's module
got imported. ``N`` (e.g. 10000): the wall time and resident-set growth of building ``N``
agents (``autoload=False``) and keeping them. Prints one JSON object. Run it against two
trees with ``PYTHONPATH=<tree>/src:<tree>`` to compare them.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time

from mainspring import Agent

from .common import ScriptProvider, median

__all__ = ["main"]


def _rss() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def main(mode: str) -> dict[str, object]:
    """The figures for ``mode`` (see the module docstring)."""
    provider = ScriptProvider([])
    out: dict[str, object] = {}
    if mode == "single":
        start = time.perf_counter()
        Agent(model="faux:bench", provider=provider, autoload=False)
        out["first_s"] = time.perf_counter() - start
        for autoload in (False, True):
            times = []
            for _ in range(101):
                start = time.perf_counter()
                Agent(model="faux:bench", provider=provider, autoload=autoload)
                times.append(time.perf_counter() - start)
            out[f"autoload={autoload}_s"] = median(times[1:])
        out["local_provider_imported"] = "mainspring.providers.local" in sys.modules
        return out
    count = int(mode)
    Agent(model="faux:bench", provider=provider, autoload=False)
    gc.collect()
    before = _rss()
    start = time.perf_counter()
    agents = [Agent(model="faux:bench", provider=provider, autoload=False) for _ in range(count)]
    out["seconds"] = time.perf_counter() - start
    gc.collect()
    out["rss_mb"] = (_rss() - before) / 2**20
    out["agents"] = len(agents)
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1] if len(sys.argv) > 1 else "single")))
