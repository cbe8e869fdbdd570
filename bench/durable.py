"""``python -m bench.durable [--postgres URL]``: what durability costs (a report).

- **Added cost per turn**: a durable run of 21 turns and one of 1 turn (one tool call a
  turn), each timed on a worker in this process from the agent built to the run settled
  (the worker's report lines); the difference over 20 turns, less the in-memory kernel's
  own per-turn time (same script, no database). The median of 7 interleaved rounds.
- **Floor**: a bare DBOS workflow doing the same checkpoints (two steps a turn: a model
  step returning the reply's deltas, a tool step returning the result), enqueued on the
  same queue and run by the same DBOS instance in the same process, timed from its first
  step to its last; the ratio of the durable run's added cost to it is what mainspring
  adds over DBOS itself, each round's added cost over the same round's floor (adjacent
  runs share the machine's load), the median of the rounds. **Events per second** of one
  run: its events per turn over its time per turn.
- **Journal bytes per reply**: the journal rows written for one streamed reply of 8,000
  characters, against the reply's own size (and those of its ``message_update`` rows).
- **Recovery**: a worker killed inside turn 10's tool; the time from starting its
  replacement (a new process) to the run settled, and the part of it spent replaying.
- **Throughput**: 60 one-turn runs queued, then 1 (SQLite, PostgreSQL) or 3 (PostgreSQL)
  worker processes started; runs per second from the first start to the last settled,
  and the events they journaled per second per worker, from the first run dequeued to
  the last settled (process start left out).

SQLite runs in a temporary directory; PostgreSQL only with ``--postgres URL`` (a database
this may fill with tables). Figures are one run's (per turn: a median), on this machine.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .durable_worker import factory

RUNS = 60
LONG = 21
ROUNDS = 7


def _wait(check: Any, timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError("the bench run did not settle")
        time.sleep(0.005)


async def _in_memory_per_turn(turns: int) -> float:
    agent = factory({"options": {"turns": turns}})
    start = time.perf_counter()
    await agent.prompt("go")
    return (time.perf_counter() - start) / (turns + 1)


_BARE: list[Any] = []


def _bare_workflow() -> Any:
    """The floor: a DBOS workflow of two steps a turn, as a durable turn checkpoints."""
    if _BARE:
        return _BARE[0]
    from dbos import DBOS

    async def model_step(turn: int) -> dict[str, Any]:
        deltas = [{"type": "text_delta", "text": f"turn {turn}"}]
        deltas.append({"type": "tool_call_start", "id": f"c{turn}", "name": "tick"})
        deltas.append(
            {"type": "tool_call_delta", "id": f"c{turn}", "arguments_json_fragment": "{}"}
        )
        deltas += [{"type": "tool_call_end", "id": f"c{turn}"}, {"type": "done"}]
        return {"deltas": deltas, "error": None}

    async def tool_step() -> dict[str, Any]:
        return {"result": {"content": [{"type": "text", "text": "ok"}]}, "updates": 0}

    @DBOS.workflow(name="bench.bare")
    async def bare(turns: int) -> int:
        _clock(f"run {DBOS.workflow_id} started")
        for turn in range(turns):
            await DBOS.run_step_async({"name": "bench.model"}, model_step, turn)
            await DBOS.run_step_async({"name": "bench.tool"}, tool_step)
        await DBOS.run_step_async({"name": "bench.model"}, model_step, turns)
        _clock(f"run {DBOS.workflow_id} settled: stop")
        return turns

    _BARE.append(bare)
    return bare


_CLOCK: dict[str, list[float]] = {}
"""Run or floor workflow id -> the ``perf_counter`` times it started and settled on the
worker in this process (a durable run's from the worker's report lines)."""


def _clock(line: str) -> None:
    """The bench's worker report: ``run ID started ...`` / ``run ID settled ...``."""
    _, run_id, what, *_ = line.split()
    if what in ("started", "settled:"):
        _CLOCK.setdefault(run_id, []).append(time.perf_counter())


def _run_s(workflow_id: str) -> float:
    """A workflow's time on the worker, once it has settled: the same span for a durable
    run (agent built to run settled) and for the floor (first step to last)."""
    _wait(lambda: len(_CLOCK.get(workflow_id, ())) == 2)
    started, settled = _CLOCK.pop(workflow_id)
    return settled - started


def _per_turn(url: str, rounds: int = ROUNDS) -> tuple[float, float, float, float, float]:
    """Per turn: the durable run, the in-memory kernel, the bare DBOS floor (seconds, each
    the median of ``rounds`` interleaved rounds), the durable run's events per turn, and
    the median over the rounds of the added cost over the floor of the same round."""
    from mainspring.durable import Runs, start_worker, stop_worker
    from mainspring.durable.config import APP_VERSION, DEFAULT_QUEUE

    _bare_workflow()
    start_worker(url=url, factory=factory, executor_id="bench", report=_clock)
    durable: list[float] = []
    bare: list[float] = []
    try:
        with Runs(url) as runs:

            def bare_run(turns: int) -> str:
                options = {"workflow_name": "bench.bare", "queue_name": DEFAULT_QUEUE}
                handle = runs.client.enqueue({**options, "app_version": APP_VERSION}, turns)
                return str(handle.workflow_id)

            _run_s(runs.submit("warm up"))
            _run_s(bare_run(1))
            for _ in range(rounds):
                # interleaved: a load that comes and goes weighs on both alike
                times, floor = {}, {}
                for turns in (1, LONG):
                    run_id = runs.submit("go", options={"turns": turns})
                    times[turns] = _run_s(run_id)
                    floor[turns] = _run_s(bare_run(turns))
                durable.append((times[LONG] - times[1]) / (LONG - 1))
                bare.append((floor[LONG] - floor[1]) / (LONG - 1))
            events = len(runs.events(run_id)) / (LONG + 1)  # the last run, of LONG turns
    finally:
        stop_worker()
    memory = statistics.median(asyncio.run(_in_memory_per_turn(LONG)) for _ in range(rounds))
    rounds_ratio = [(run - memory) / floor for run, floor in zip(durable, bare, strict=True)]
    ratio = statistics.median(rounds_ratio)
    return statistics.median(durable), memory, statistics.median(bare), events, ratio


def _journal_bytes(url: str) -> tuple[int, int, int]:
    """The journal bytes of one 8,000-character streamed reply, those of its deltas, and
    the reply's size."""
    from mainspring.durable import Runs, start_worker, stop_worker

    start_worker(url=url, factory=factory, executor_id="bench-journal")
    try:
        with Runs(url) as runs:
            run_id = runs.submit("long", options={"turns": 0, "reply_chars": 8000})
            runs.result(run_id, timeout_s=300)
            events = runs.events(run_id)
            sizes = runs.journal.row_bytes(run_id)
            deltas = runs.journal.row_bytes(run_id, ("message_update",))
    finally:
        stop_worker()
    reply = sum(len(e["delta"].get("text", "")) for e in events if e["type"] == "message_update")
    return sizes, deltas, reply


def _spawn(directory: Path, url: str, executor: str, **env: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "bench.durable_worker", str(directory), url, executor],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **env},
    )


def _recovery(url: str, directory: Path) -> float:
    from mainspring.durable import Runs

    with Runs(url) as runs:
        run_id = runs.submit("go", options={"turns": 20})
        first = _spawn(directory, url, "r1", CRASH_AT="10")
        _wait(lambda: (directory / "crashed").exists())
        first.send_signal(signal.SIGKILL)
        first.wait()
        start = time.perf_counter()
        second = _spawn(directory, url, "r1", CRASH_AT="10")
        try:
            runs.result(run_id, timeout_s=300)
            return time.perf_counter() - start
        finally:
            second.send_signal(signal.SIGTERM)
            second.wait()


def _throughput(url: str, directory: Path, count: int) -> tuple[float, float]:
    """Runs per second of ``count`` worker processes draining ``RUNS`` queued one-turn runs
    (from their start), and the events journaled per second per worker while they serve
    (from the first run dequeued to the last settled)."""
    from mainspring.durable import Runs

    with Runs(url) as runs:
        ids = [runs.submit(f"run {n}") for n in range(RUNS)]
        start = time.perf_counter()
        workers = [_spawn(directory, url, f"t{n}") for n in range(count)]
        try:
            _wait(lambda: any(runs.get(run_id).status != "ENQUEUED" for run_id in ids[:count]))
            serving = time.perf_counter()
            for run_id in ids:
                runs.result(run_id, timeout_s=600)
            end = time.perf_counter()
        finally:
            for worker in workers:
                worker.send_signal(signal.SIGTERM)
                worker.wait()
        events = sum(len(runs.events(run_id)) for run_id in ids)
    return RUNS / (end - start), events / (end - serving) / count


def _startup() -> float:
    """Seconds for a worker process to import and launch (the recovery's fixed part)."""
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", "import mainspring.durable, dbos"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.durable")
    parser.add_argument("--postgres", default=os.environ.get("MAINSPRING_BENCH_POSTGRES_URL"))
    args = parser.parse_args(argv)
    rows: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory() as temporary:
        root = Path(temporary)
        databases = {"SQLite": f"sqlite:///{root / 'bench.sqlite'}"}
        if args.postgres:
            databases["PostgreSQL"] = args.postgres
        for name, url in databases.items():
            durable, memory, bare, events, ratio = _per_turn(url)
            added = durable - memory
            rows.append((f"{name}: per turn, durable", f"{durable * 1000:.1f} ms"))
            rows.append((f"{name}: events per turn", f"{events:.1f}"))
            rows.append((f"{name}: events/s, one run", f"{events / durable:.0f}"))
            rows.append((f"{name}: per turn, in memory", f"{memory * 1000:.2f} ms"))
            rows.append((f"{name}: added per turn", f"{added * 1000:.1f} ms"))
            rows.append((f"{name}: bare DBOS floor per turn", f"{bare * 1000:.1f} ms"))
            rows.append((f"{name}: added / floor (median of rounds)", f"{ratio:.2f}x"))
            journal, deltas, reply = _journal_bytes(url)
            rows.append((f"{name}: journal bytes / reply chars", f"{journal / reply:.2f}"))
            rows.append((f"{name}: the same, deltas alone", f"{deltas / reply:.2f}"))
            work = root / name
            work.mkdir()
            rows.append((f"{name}: recovery, restart to settled", f"{_recovery(url, work):.2f} s"))
            for count in (1, 3) if name == "PostgreSQL" else (1,):
                rate, events_per_worker = _throughput(url, work, count)
                label = f"{name}: {RUNS} one-turn runs, {count} worker(s)"
                rows.append((label, f"{rate:.1f} runs/s"))
                rows.append((f"{label}, per worker", f"{events_per_worker:.0f} events/s"))
    rows.append(("worker import (fresh process)", f"{_startup():.2f} s"))
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        print(f"{label:<{width}}  {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
