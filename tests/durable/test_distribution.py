"""Distribution on PostgreSQL: three workers, 200 queued runs, one worker killed halfway.

Every run completes exactly once: each settles once with the scripted outcome, each
checkpointed tool call ran once, and no run was executed by two workers at once (a run
moves to another process only when the one running it was killed). A call's checkpoint
is its final result, written when the kernel ends the call: a call of the idempotent
tool that returned in the killed worker before that may run again; the non-idempotent
tool's never does.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

from mainspring.durable import Runs

RUNS = 200


@pytest.mark.parametrize("database", ["postgresql"], indirect=True)
def test_runs_spread_over_workers_complete_exactly_once_when_one_dies(workers: Any) -> None:
    env = {"LOG_RUNS": "1", "WORKER_CONCURRENCY": "10"}
    with Runs(workers.url) as runs:
        ids = [runs.submit(f"Run number {n}.") for n in range(RUNS)]
        started = {name: workers.start(name, **env) for name in ("w1", "w2", "w3")}

        def settled() -> int:
            return sum(1 for info in runs.list(limit=RUNS + 10) if info.finished)

        workers.wait(lambda: settled() >= RUNS // 2, 300, "half of the runs")
        victim = started["w2"]
        workers.kill(victim)
        workers.start("w2", **env)
        workers.wait(lambda: settled() == RUNS, 300, "every run")
        infos = {info.run_id: info for info in runs.list(limit=RUNS + 10)}
        assert sorted(infos) == sorted(ids)
        assert {(info.status, info.reason, info.turns) for info in infos.values()} == {
            ("SUCCESS", "stop", 4)
        }
        executors = {info.executor_id for info in infos.values()}
        assert executors <= {"w1", "w2", "w3"} and len(executors) > 1
    lines = (workers.directory / "tools.log").read_text().splitlines()
    calls: dict[tuple[str, str], list[tuple[str, int]]] = defaultdict(list)
    for line in lines:
        call, _tool, what, run_id, pid = line.split()
        calls[(run_id, call)].append((what, int(pid)))
    assert {run_id for run_id, _ in calls} == set(ids)
    for (run_id, call), seen in calls.items():
        done = [pid for what, pid in seen if what == "done"]
        starts = [pid for what, pid in seen if what == "start"]
        # done more than once only for a call the killed worker ran and never checkpointed
        assert len(done) <= 1 or done[:-1] == [victim.pid] * (len(done) - 1), (
            run_id,
            call,
            seen,
        )
        # a second start only after the first process was killed in the call
        if len(starts) > 1:
            assert starts[:-1] == [victim.pid] * (len(starts) - 1), (run_id, call, seen)
            assert call != "c1", "the non-idempotent tool ran again"
        if not done:
            assert starts == [victim.pid] and call == "c1", (run_id, call, seen)
