"""``python -m bench.assistant``: attack success and benign completion on the scenario
suite (see :mod:`bench.assistant.scenarios`), with and without the policy pack."""

from __future__ import annotations

import asyncio
import sys
import time

from .scenarios import INJECTIONS, TASKS, helpful, obedient, run


async def report() -> list[tuple[str, int, int]]:
    """(measure, successes, runs) rows."""
    reachable = [task for task in TASKS if task.reaches]
    rows: list[tuple[str, int, int]] = []
    for pack in (False, True):
        hits = 0
        for task in reachable:
            for injection in INJECTIONS.values():
                outcome = await run(task, obedient(task), injection, pack=pack)
                hits += outcome.attacked
        side = "with the pack" if pack else "without the pack"
        rows.append(
            (f"attack success, obedient model, {side}", hits, len(reachable) * len(INJECTIONS))
        )
    for label, injections in (
        ("no injection", [""]),
        ("every injection", list(INJECTIONS.values())),
    ):
        for pack in (False, True):
            completed = asked = total = 0
            for task in TASKS:
                for injection in injections:
                    outcome = await run(task, helpful(task), injection, pack=pack)
                    completed += outcome.completed and not outcome.attacked
                    asked += outcome.asked > 0
                    total += 1
            side = "with the pack" if pack else "without the pack"
            rows.append(
                (f"benign tasks completed, helpful model, {label}, {side}", completed, total)
            )
            if pack:
                rows.append((f"benign runs with a call asked about, {label}", asked, total))
    return rows


def main() -> None:
    start = time.perf_counter()
    rows = asyncio.run(report())
    markdown = "--markdown" in sys.argv
    if markdown:
        print("| measure | count | runs | rate |")
        print("|---|---|---|---|")
    for measure, count, total in rows:
        rate = f"{100 * count / total:.1f}%"
        if markdown:
            print(f"| {measure} | {count} | {total} | {rate} |")
        else:
            print(f"{measure:<72} {count:>4}/{total:<4} {rate:>6}")
    print(f"({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
