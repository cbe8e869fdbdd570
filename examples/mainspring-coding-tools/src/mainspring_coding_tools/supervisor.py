"""The supervisor of one ``bash`` command: every process the command starts ends with it.

Killing the command's process group is not enough: ``setsid cmd &``, ``setsid -f``,
``timeout N cmd &`` and a process calling ``setpgid`` leave the group, and a double fork
leaves the shell's children. This supervisor is a small process between the agent and
the shell that sees them all:

- On Linux it makes itself a *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``), so
  every process orphaned below it (a daemon whose parent exited) is re-parented to it
  rather than to init: whatever the command starts stays its descendant.
- It runs ``<shell> -c <command>`` in a process group of its own, with standard input
  from ``/dev/null`` and its own standard output and error (the agent's output pipe).
- When the shell exits, or when the agent asks it to stop, it kills (``SIGKILL``) every
  descendant it can find in ``/proc`` and reaps them, again and again until it has no
  child left (a process forking while it is killed only adds a round). Only then does it
  report the outcome and exit: once the agent has the report, nothing the command started
  is running.

Protocol (standard input is a stream socket to the agent): the supervisor writes
``pid <shell pid>`` once the shell runs, and one final line: ``exit <code>``,
``signal <number>``, ``stopped`` (the agent asked it to stop) or ``error <message>`` (the
shell could not be started). Anything the agent sends, or the end of the socket (the
agent closed it, or died), means *stop now*. ``SIGTERM``, ``SIGHUP`` and ``SIGINT`` are
ignored, so ``kill $PPID`` does not end the supervision; ``SIGKILL`` does, and what was
running then survives: only OS-level isolation (a cgroup, a container) closes that gap.

Without a subreaper (not Linux) it kills the shell's process group only.

Run sandboxed (:mod:`mainspring_coding_tools.sandbox`), it is the first process of a new
PID namespace (pid 1): it first covers each directory named after the command (``argv[3:]``,
the agent's data directory) with an empty read-only ``tmpfs`` in its mount namespace, then
drops every capability from its bounding set before it starts the shell, so nothing the
command runs can regain one (to unmount the namespace's ``/proc`` or those covers, say);
and when it exits, the kernel kills whatever is left in the namespace. If a directory
cannot be covered, or a capability dropped, the command is not run (``error`` report).

This file runs as a script (``python -I -S supervisor.py <shell> <command>``) and imports
nothing but the standard library.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import select
import signal
import sys

_PR_SET_CHILD_SUBREAPER = 36
_PR_CAPBSET_DROP = 24
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_LAST_CAPABILITY = 63
_CONTROL = 0
_ROUND_WAIT_S = 0.05
"""The longest one cleaning round waits for a child to exit before it looks again."""


def become_subreaper() -> bool:
    """Make orphaned descendants re-parent to this process (Linux); whether it worked."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def report(line: str) -> None:
    """Send one protocol line to the agent (see the module docs)."""
    with contextlib.suppress(OSError):
        os.write(_CONTROL, f"{line}\n".encode())


def cover(directory: str) -> str | None:
    """Mount an empty read-only ``tmpfs`` over ``directory``; why not, or ``None``."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError as error:
        return str(error)
    flags = _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
    target = os.fsencode(directory)
    if libc.mount(b"tmpfs", target, b"tmpfs", flags, b"size=4k,mode=0500") != 0:
        return os.strerror(ctypes.get_errno())
    return None


def drop_capabilities() -> bool:
    """Drop every capability from the bounding set (Linux); whether all went."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return False
    for capability in range(_LAST_CAPABILITY + 1):
        if libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            # EINVAL past the last capability this kernel knows: all dropped
            return capability > 0 and ctypes.get_errno() == errno.EINVAL
    return True


def descendants(root: int) -> list[int]:
    """Every process below ``root`` (children first), from the parent ids in ``/proc``."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    found: list[int] = []
    queue = [root]
    while queue:
        for child in children.get(queue.pop(), ()):
            found.append(child)
            queue.append(child)
    return found


class Supervisor:
    """Runs one command and ends everything it started (see the module docs)."""

    def __init__(self, shell: str, command: str) -> None:
        self.shell = shell
        self.command = command
        self.subreaper = become_subreaper()
        self.sandboxed = os.getpid() == 1 and drop_capabilities()
        self.shell_pid = 0
        self.shell_status: int | None = None
        self._wake_read, wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        os.set_blocking(wake_write, False)
        signal.set_wakeup_fd(wake_write)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # only to write to the wakeup pipe
        for number in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(number, lambda *_: None)

    def report(self, line: str) -> None:
        report(line)

    def start(self) -> None:
        """Start the shell; ``OSError`` if it cannot be."""
        devnull = os.open(os.devnull, os.O_RDONLY)
        try:
            self.shell_pid = os.posix_spawn(
                self.shell,
                [self.shell, "-c", self.command],
                os.environ,
                file_actions=[(os.POSIX_SPAWN_DUP2, devnull, 0)],
                setpgroup=0,
                # Python ignores these; a command must get the default behaviour back
                # (handled signals are reset by exec anyway)
                setsigdef=(signal.SIGPIPE, signal.SIGXFSZ),
            )
        finally:
            os.close(devnull)

    def _drain_wakeups(self) -> None:
        with contextlib.suppress(BlockingIOError):
            while os.read(self._wake_read, 512):
                pass

    def _reap(self) -> bool:
        """Reap every child that has exited; ``False`` once no child is left."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return False
            if pid == 0:
                return True
            if pid == self.shell_pid:
                self.shell_status = status

    def wait(self) -> bool:
        """Wait for the shell to exit (``True``) or the agent to ask for a stop (``False``)."""
        while self.shell_status is None:
            ready, _, _ = select.select([_CONTROL, self._wake_read], [], [])
            if _CONTROL in ready:
                return False
            self._drain_wakeups()
            self._reap()
        return True

    def end_everything(self) -> None:
        """Kill and reap every descendant, until no child is left."""
        with contextlib.suppress(OSError):
            os.killpg(self.shell_pid, signal.SIGKILL)
        while True:
            if self.subreaper:
                for pid in descendants(os.getpid()):
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
            if not self._reap():
                return
            select.select([self._wake_read], [], [], _ROUND_WAIT_S)
            self._drain_wakeups()

    def outcome(self, finished: bool) -> str:
        """The final report line."""
        status = self.shell_status
        if not finished or status is None:
            return "stopped"
        if os.WIFSIGNALED(status):
            return f"signal {os.WTERMSIG(status)}"
        return f"exit {os.waitstatus_to_exitcode(status)}"


def main(argv: list[str]) -> int:
    """Run ``argv[1] -c argv[2]`` under supervision, sandboxed: with ``argv[3:]``
    covered; the exit code is always 0."""
    if os.getpid() == 1:
        for directory in argv[3:]:
            why = cover(directory)
            if why is not None:
                report(f"error the sandbox could not hide {directory}: {why}")
                return 0
    supervisor = Supervisor(argv[1], argv[2])
    if os.getpid() == 1 and not supervisor.sandboxed:
        supervisor.report("error the sandbox could not drop its capabilities")
        return 0
    try:
        supervisor.start()
    except OSError as error:
        supervisor.report(f"error cannot run {argv[1]}: {error.strerror or error}")
        return 0
    supervisor.report(f"pid {supervisor.shell_pid}")
    finished = False
    try:
        finished = supervisor.wait()
    finally:
        supervisor.end_everything()
    supervisor.report(supervisor.outcome(finished))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
