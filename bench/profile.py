"""``python -m bench.profile W1 [--top 25] [--sort tottime]``: where mainspring's time goes.

Runs the mainspring side of one workload a few times under :mod:`cProfile` (after a
warm-up run) and prints the top functions, with file:line, by own time and by
cumulative time. Profiling inflates small functions, so read it for the shape of the
cost, and the table of ``python -m bench`` for its size.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from . import deltas, fanout, history, turns
from .plugins import AsyncHookPlugin, SyncHookPlugin, hook_plugins

TARGETS: dict[str, Callable[[], Awaitable[Any]]] = {
    "W1": turns.mainspring_once,
    "W1h": lambda: turns.mainspring_once(plugins=hook_plugins(SyncHookPlugin)),
    "W1h-async": lambda: turns.mainspring_once(plugins=hook_plugins(AsyncHookPlugin)),
    "W2": fanout._mainspring,
    "W3": deltas._mainspring,
    "W4": lambda: history._mainspring(history._WITH_USAGE),
    "W4-nousage": lambda: history._mainspring(history._WITHOUT_USAGE),
}


async def _profile(target: Callable[[], Awaitable[Any]], runs: int) -> cProfile.Profile:
    await target()  # warm-up
    profiler = cProfile.Profile()
    for _ in range(runs):
        profiler.enable()
        await target()
        profiler.disable()
    return profiler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.profile")
    parser.add_argument("workload", choices=sorted(TARGETS))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--sort", default="both", choices=["tottime", "cumulative", "both"])
    args = parser.parse_args(argv)
    profiler = asyncio.run(_profile(TARGETS[args.workload], args.runs))
    stats = pstats.Stats(profiler, stream=sys.stdout).strip_dirs()
    for key in ("tottime", "cumulative") if args.sort == "both" else (args.sort,):
        print(f"\n=== {args.workload}, {args.runs} runs, by {key} ===")
        stats.sort_stats(key).print_stats(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
