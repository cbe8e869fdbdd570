"""A bash call's processes end with the call, whatever they do to leave its process group.

Each test starts five escapees from one command, the usual ways out of a process group:
``setsid cmd &``, ``setsid -f cmd``, ``timeout N cmd &``, a process calling
``os.setpgid(0, 0)``, and a classic daemon (fork, ``setsid``, fork again, the middle
process exits). Each escapee records its pid, says it is up on a FIFO the shell reads,
and would write a marker file a little after the call should have ended it. The call
then ends in one of three ways: the shell exits, the timeout passes, or the run is
aborted. Afterwards no escapee may be alive, and
no marker may appear.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mainspring.testing import EventRecorder, check_event_grammar, faux

Exited = Callable[..., bool]

ESCAPEE = """
import os, sys, time
name, how, delay = sys.argv[1], sys.argv[2], float(sys.argv[3])
if how == "setpgid":
    os.setpgid(0, 0)
if how == "daemon":
    if os.fork():
        os.wait()
        sys.exit(0)
    os.setsid()
    if os.fork():
        os._exit(0)
with open(name + ".pid", "w") as f:
    f.write(str(os.getpid()))
with open("ready", "w") as f:
    f.write(name + "\\n")
time.sleep(delay)
with open(name + ".marker", "w") as f:
    f.write("escaped")
"""

ESCAPES = {
    "setsid": "setsid {py} escapee.py setsid plain {delay} &",
    "setsid_f": "setsid -f {py} escapee.py setsid_f plain {delay}",
    "timeout": "timeout 30 {py} escapee.py timeout plain {delay} &",
    "setpgid": "{py} escapee.py setpgid setpgid {delay} &",
    "daemon": "{py} escapee.py daemon daemon {delay}",
}

OUTSIDE = "off"
"""``bash_sandbox`` here: the escapees' pids are checked from this PID namespace (the
sandboxed command's escapees are checked in test_coding_tools_sandbox)."""

MARKER_WATCH_S = 0.6
"""How long the test watches for a marker after the call (past every escapee's delay)."""


def _command(then: str, delay_s: float = 0.3) -> str:
    """Start every escapee (a marker ``delay_s`` after it is up), wait until all five
    said they are up, then ``then``."""
    starts = "\n".join(line.format(py=sys.executable, delay=delay_s) for line in ESCAPES.values())
    wait = "for _ in 1 2 3 4 5; do read -r up <&3; done"
    return f"exec 3<>ready\n{starts}\n{wait}\necho all up\n{then}"


@pytest.fixture
def coding_escapees(coding_ws: Path, coding_exited: Exited) -> Callable[[], None]:
    """Prepare the workspace; returns the check to run after the call."""
    if not os.path.isdir("/proc/self"):
        pytest.skip("needs /proc")
    (coding_ws / "escapee.py").write_text(ESCAPEE)
    os.mkfifo(coding_ws / "ready")

    def check() -> None:
        pids = {name: int((coding_ws / f"{name}.pid").read_text()) for name in ESCAPES}
        alive = [name for name, pid in pids.items() if not coding_exited(pid, within_s=0)]
        assert alive == [], f"still running after the call: {alive}"
        watch_until = time.monotonic() + MARKER_WATCH_S
        while time.monotonic() < watch_until:  # a bounded watch for what must not happen
            written = sorted(p.name for p in coding_ws.glob("*.marker"))
            assert written == [], f"escaped processes wrote {written}"
            time.sleep(0.05)

    return check


async def test_processes_end_when_the_shell_exits(
    coding_call: Any, coding_escapees: Callable[[], None]
) -> None:
    (result,) = await coding_call(("bash", {"command": _command("exit 0")}), bash_sandbox=OUTSIDE)

    assert result.text == "all up\n[exit code: 0]"
    coding_escapees()


async def test_processes_end_when_the_command_times_out(
    coding_call: Any, coding_escapees: Callable[[], None]
) -> None:
    (result,) = await coding_call(
        ("bash", {"command": _command("sleep 30", delay_s=2.3), "timeout_s": 2}),
        bash_sandbox=OUTSIDE,
    )

    assert result.details["timed_out"] is True
    assert result.text.startswith("all up\n[timed out after 2 s")
    coding_escapees()


async def test_processes_end_when_the_run_is_aborted(
    coding_ws: Path, coding_make_agent: Any, coding_escapees: Callable[[], None]
) -> None:
    os.mkfifo(coding_ws / "notify")
    command = _command("echo up > notify; sleep 30")
    steps = [faux.tool_call("bash", {"command": command}), faux.text("x")]
    agent, _ = coding_make_agent(steps, bash_sandbox=OUTSIDE)
    recorder = EventRecorder()
    agent.subscribe(recorder)
    loop = asyncio.get_running_loop()
    notified: asyncio.Future[None] = loop.create_future()
    # read-write, so the open does not wait for the writer and the FIFO never reports EOF
    fifo = os.open(coding_ws / "notify", os.O_RDWR | os.O_NONBLOCK)
    loop.add_reader(fifo, lambda: notified.done() or notified.set_result(None))

    async def abort_once_all_are_up() -> None:
        await asyncio.wait_for(notified, timeout=20)
        agent.abort()

    try:
        await asyncio.gather(agent.prompt("go"), abort_once_all_are_up())
    finally:
        loop.remove_reader(fifo)
        os.close(fifo)

    check_event_grammar(recorder.events)
    (result,) = recorder.messages("tool_result")
    assert result.is_error and "aborted" in result.text
    coding_escapees()


async def test_the_supervisor_survives_a_polite_kill_and_still_cleans_up(
    coding_ws: Path, coding_call: Any, coding_exited: Exited
) -> None:
    command = (
        # the shell's parent is the supervisor: ask it politely to go away (only it)
        "sleep 30 & echo $! > bg.pid; setsid sleep 30 & echo $! > bg2.pid; "
        "grep -q supervisor /proc/$PPID/cmdline && kill $PPID; echo $?"
    )

    (result,) = await coding_call(("bash", {"command": command}), bash_sandbox=OUTSIDE)

    assert result.text == "0\n[exit code: 0]"
    for name in ("bg.pid", "bg2.pid"):
        assert coding_exited(int((coding_ws / name).read_text()), within_s=0)
