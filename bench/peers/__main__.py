"""``python -m bench.peers setup|run``: W1 and W3 on peer frameworks, beside mainspring.

``setup`` creates one venv per peer under ``bench/.peers/`` (gitignored) and installs the
pinned framework into it; ``run`` runs each installed peer's driver
(``bench/peers/drive_*.py``, in that peer's venv, with a scripted model through the
framework's normal streaming loop and one listener), then W1 and W3 on mainspring and
the floor in this process, and prints one table. Peers that are not set up are skipped.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .. import deltas, turns
from ..common import median, settle
from ..report import machine

HERE = Path(__file__).resolve().parent
VENVS = HERE.parent / ".peers"

PEERS: dict[str, tuple[str, str]] = {
    # name: (pip requirement, driver script)
    "pydantic-ai": ("pydantic-ai-slim==2.68.0", "drive_pydantic_ai.py"),
    "openai-agents": ("openai-agents==0.24.0", "drive_openai_agents.py"),
    "langchain": ("langchain==1.5.2", "drive_langchain.py"),
    "strands": ("strands-agents==1.62.0", "drive_strands.py"),
}


def _python(name: str) -> Path:
    return VENVS / name / "bin" / "python"


def setup(names: list[str]) -> None:
    for name in names:
        requirement, _ = PEERS[name]
        if not _python(name).exists():
            subprocess.run([sys.executable, "-m", "venv", str(VENVS / name)], check=True)
        print(f"installing {requirement} into {VENVS / name} …", flush=True)
        subprocess.run(
            [str(_python(name)), "-m", "pip", "install", "--quiet", requirement], check=True
        )


def _drive(name: str, reps: int) -> dict[str, Any] | str:
    _, driver = PEERS[name]
    if not _python(name).exists():
        return "not set up (python -m bench.peers setup)"
    done = subprocess.run(
        [str(_python(name)), str(HERE / driver), str(reps)],
        capture_output=True,
        text=True,
        cwd=HERE,
    )
    if done.returncode:
        return "failed: " + (done.stderr.strip().splitlines() or ["?"])[-1]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


async def _local(reps: int) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    sides = {
        "mainspring": (turns.mainspring_once, deltas._mainspring),
        "floor": (turns.floor_once, deltas._floor),
    }
    for side, (w1, w3) in sides.items():
        per_turn, flat, per_delta = [], [], []
        for rep in range(reps + 1):
            settle()
            one = await w1()
            delta, _ = await w3()
            if rep:
                per_turn.append(one.per_turn_us)
                flat.append(one.flatness)
                per_delta.append(delta * 1e6)
        out[side] = {
            "framework": side,
            "version": "this tree" if side == "mainspring" else "—",
            "w1_per_turn_us": median(per_turn),
            "w1_flatness": median(flat),
            "w3_per_delta_us": median(per_delta),
        }
    return out


def run(names: list[str], reps: int, markdown: bool) -> None:
    results = asyncio.run(_local(reps))
    floor = results["floor"]
    failures: dict[str, str] = {}
    for name in names:
        start = time.perf_counter()
        print(f"running {name} …", file=sys.stderr, flush=True)
        outcome = _drive(name, reps)
        print(f"  {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)
        if isinstance(outcome, str):
            failures[name] = outcome
        else:
            results[name] = outcome
    headers = ["framework", "version", "W1 µs/turn (CPU)", "× floor", "W1 flatness",
               "W3 µs/delta (CPU)", "× floor"]  # fmt: skip
    rows = [headers]
    for result in results.values():
        turn, delta = result["w1_per_turn_us"], result["w3_per_delta_us"]
        rows.append([
            result["framework"], result["version"], f"{turn:,.1f}",
            f"{turn / floor['w1_per_turn_us']:.1f}×", f"{result['w1_flatness']:.2f}",
            f"{delta:,.2f}", f"{delta / floor['w3_per_delta_us']:.1f}×",
        ])  # fmt: skip
    print(f"peers (median of {reps} runs each) on {machine()}\n")
    if markdown:
        print("| " + " | ".join(headers) + " |\n|" + "---|" * len(headers))
        print("\n".join("| " + " | ".join(row) + " |" for row in rows[1:]))
    else:
        widths = [max(len(row[i]) for row in rows) for i in range(len(headers))]
        for row in rows:
            print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))
    for name, why in failures.items():
        print(f"{name}: {why}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.peers")
    parser.add_argument("command", choices=["setup", "run"])
    parser.add_argument("--only", help="comma-separated peers: " + ", ".join(PEERS))
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    names = [part.strip() for part in args.only.split(",")] if args.only else list(PEERS)
    unknown = [name for name in names if name not in PEERS]
    if unknown:
        parser.error(f"unknown peer(s): {', '.join(unknown)}")
    if args.command == "setup":
        setup(names)
    else:
        run(names, args.reps, args.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
