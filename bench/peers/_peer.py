"""What every peer driver shares: the workload sizes and the measuring loop.

Runs inside a peer's own venv, so it imports nothing from mainspring or bench. Each
driver supplies ``run_once(workload, marks, clock)``, which runs W1 (200 turns, one
trivial async tool call each) or W3 (one reply of 5,000 text deltas) through the
framework's normal streaming loop with one listener, appending ``clock()`` to ``marks``
each time its scripted model is called, and returns how many events the listener saw.
"""

from __future__ import annotations

import gc
import itertools
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

TURNS = 200
DELTAS = 5_000
WINDOW = 20
PIECES = [f"w{i % 10} " for i in range(DELTAS)]

RunOnce = Callable[[str, list[float], Callable[[], float]], Awaitable[int]]


def _flatness(start: float, marks: list[float], end: float) -> float:
    points = [*marks, end]
    turns = [b - a for a, b in itertools.pairwise(points)]
    tool_turns = turns[1:-1]
    first, last = tool_turns[:WINDOW], tool_turns[-WINDOW:]
    return (sum(last) / len(last)) / (sum(first) / len(first))


async def measure(run_once: RunOnce, reps: int) -> dict[str, Any]:
    """Medians over ``reps`` runs (after a warm-up) of W1 per-turn CPU, flatness, W3."""
    clock = time.process_time
    per_turn, flat, per_delta, events = [], [], [], {}
    for rep in range(reps + 1):
        for workload in ("W1", "W3"):
            marks: list[float] = []
            gc.collect()
            start = clock()
            seen = await run_once(workload, marks, clock)
            total = clock() - start
            events[workload] = seen
            if not rep:
                continue
            if workload == "W1":
                if len(marks) != TURNS:
                    raise RuntimeError(f"W1 made {len(marks)} model calls, not {TURNS}")
                per_turn.append(total / TURNS * 1e6)
                flat.append(_flatness(start, marks, start + total))
            else:
                per_delta.append(total / DELTAS * 1e6)
    return {
        "w1_per_turn_us": statistics.median(per_turn),
        "w1_flatness": statistics.median(flat),
        "w3_per_delta_us": statistics.median(per_delta),
        "events": events,
    }
