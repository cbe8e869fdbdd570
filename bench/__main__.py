"""``python -m bench``: the kernel's own overhead against a hand-written floor loop.

A report, never a test: it always exits 0 when the workloads ran, whatever they show.

    python -m bench                 every workload, medians of 7 measured runs per side
    python -m bench --quick         a fast smoke run (2 runs per side, smaller scale)
    python -m bench --only W1,W3    some workloads (names are case-insensitive)
    python -m bench --markdown      the table as Markdown (for bench/README.md)
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Awaitable, Callable

from .common import Config, Row
from .deltas import run_w3
from .fanout import run_w2
from .history import run_w4
from .mcp_calls import run_mcp
from .otel import run_w1otel
from .report import machine, render
from .scale import run_scale
from .startup import run_startup
from .turns import run_w1, run_w1h
from .wire import run_w5

Workload = Callable[[Config], Awaitable[list[Row]]]

WORKLOADS: dict[str, tuple[str, Workload]] = {
    "W1": ("200 turns, one tool call each: CPU per turn, flatness", run_w1),
    "W1h": ("W1 with 20 plugins implementing every run-time hook", run_w1h),
    "W1otel": ("W1 traced with OpenTelemetry (otel plugin): cost per turn", run_w1otel),
    "W2": ("50 concurrent tool calls sleeping 50 ms", run_w2),
    "W3": ("one reply of 5,000 text deltas, one listener", run_w3),
    "W4": ("one request over 2,000 prior messages", run_w4),
    "W5": ("SSE bytes of a 2,000-delta reply through the OpenAI and Anthropic decoders", run_w5),
    "startup": ("import time, entry-point discovery, Agent construction", run_startup),
    "scale": ("10,000 idle agents; 1,000 concurrent short runs", run_scale),
    "mcp": ("an MCP tool over stdio against the same tool native; server start", run_mcp),
}


def _selected(only: str | None) -> list[str]:
    if not only:
        return list(WORKLOADS)
    by_lower = {name.lower(): name for name in WORKLOADS}
    chosen = []
    for part in only.split(","):
        name = by_lower.get(part.strip().lower())
        if name is None:
            sys.exit(f"unknown workload {part.strip()!r}; known: {', '.join(WORKLOADS)}")
        chosen.append(name)
    return chosen


async def _run(names: list[str], config: Config) -> list[Row]:
    rows: list[Row] = []
    for name in names:
        description, workload = WORKLOADS[name]
        print(f"running {name}: {description} …", file=sys.stderr, flush=True)
        start = time.perf_counter()
        rows += await workload(config)
        print(f"  done in {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a fast smoke run")
    parser.add_argument("--only", metavar="W1,W3", help="comma-separated workload names")
    parser.add_argument("--reps", type=int, help="measured runs per side (default 7, quick 2)")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument("--list", action="store_true", help="list the workloads and exit")
    args = parser.parse_args(argv)
    if args.list:
        for name, (description, _) in WORKLOADS.items():
            print(f"{name:8} {description}")
        return 0
    reps = args.reps or (2 if args.quick else 7)
    config = Config(reps=reps, quick=args.quick)
    rows = asyncio.run(_run(_selected(args.only), config))
    mode = "quick" if args.quick else "full"
    print(f"mainspring bench ({mode}, median of {reps} runs per side) on {machine()}")
    print("ratio = mainspring cost / floor cost (higher is slower)\n")
    print(render(rows, markdown=args.markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
