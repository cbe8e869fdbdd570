"""Hard links and swapped directories cannot reach outside the workspace."""

from __future__ import annotations

import ctypes
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from mainspring_coding_tools import build_tools

CALLS = 500
MORE_CALLS = 20_000


@pytest.fixture
def coding_outside(tmp_path: Path) -> Path:
    """A directory beside the workspace holding ``secret.txt``."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("outside secret\n")
    return outside


async def test_a_hard_link_to_an_outside_file_is_refused(
    coding_ws: Path, coding_outside: Path, coding_call: Any
) -> None:
    os.link(coding_outside / "secret.txt", coding_ws / "linked.txt")
    (coding_ws / "plain.txt").write_text("plain secret\n")

    read, grep_tree, grep_file, edit = await coding_call(
        ("read", {"path": "linked.txt"}),
        ("grep", {"pattern": "secret"}),
        ("grep", {"pattern": "secret", "path": "linked.txt"}),
        ("edit", {"path": "linked.txt", "old_text": "outside", "new_text": "pwned"}),
    )
    (written,) = await coding_call(("write", {"path": "linked.txt", "content": "new\n"}))

    assert read.is_error and "linked.txt has 2 hard links" in read.text
    assert "outside secret" not in grep_tree.text
    assert grep_tree.text.splitlines() == [
        "plain.txt:1: plain secret",
        "[1 file(s) with several hard links skipped: such a file may be another name of a "
        "file outside the workspace]",
    ]
    assert grep_file.is_error and "hard links" in grep_file.text
    assert edit.is_error and "hard links" in edit.text
    # write replaces the name: the workspace file is new, the outside one untouched
    assert not written.is_error
    assert (coding_ws / "linked.txt").read_text() == "new\n"
    assert (coding_outside / "secret.txt").read_text() == "outside secret\n"


async def test_hard_links_can_be_allowed(
    coding_ws: Path, coding_outside: Path, coding_call: Any
) -> None:
    os.link(coding_outside / "secret.txt", coding_ws / "linked.txt")

    (read,) = await coding_call(("read", {"path": "linked.txt"}), allow_hard_links=True)

    assert read.text == "     1\toutside secret"


def _exchanger() -> Any:
    """``renameat2(..., RENAME_EXCHANGE)`` (swaps two names atomically), or skip."""
    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is None:
        pytest.skip("needs renameat2 to swap a directory and a symlink atomically")
    at_fdcwd, rename_exchange = -100, 2

    def exchange(first: Path, second: Path) -> None:
        if renameat2(at_fdcwd, bytes(first), at_fdcwd, bytes(second), rename_exchange) != 0:
            raise OSError(ctypes.get_errno(), "renameat2 failed")

    return exchange


async def test_a_directory_swapped_for_a_symlink_never_leaks(
    coding_ws: Path, coding_outside: Path, coding_direct: Any
) -> None:
    exchange = _exchanger()
    (coding_outside / "d").mkdir()
    (coding_outside / "d" / "secret.txt").write_text("outside secret\n")
    (coding_ws / "d").mkdir()
    (coding_ws / "d" / "secret.txt").write_text("inside\n")
    (coding_ws / "swap").symlink_to(coding_outside / "d")
    tools = {tool.name: tool for tool in build_tools(coding_ws)}
    stop = threading.Event()
    swaps = 0

    def swap_forever() -> None:
        # `d` is a directory, then a symlink to the outside, then a directory again...
        nonlocal swaps
        while not stop.is_set():
            exchange(coding_ws / "d", coding_ws / "swap")
            swaps += 1

    async def until_one_succeeds(tool: str, calls: list[Any], **args: Any) -> None:
        # on a loaded machine the swapper can win every race of a batch; a few more calls
        # show the tool still serves the workspace while the swap goes on
        for n in range(MORE_CALLS):
            calls.append(
                await coding_direct(tools[tool], **{k: v.format(n=n) for k, v in args.items()})
            )
            if not calls[-1].is_error:
                return

    swapper = threading.Thread(target=swap_forever)
    swapper.start()
    try:
        reads = [await coding_direct(tools["read"], path="d/secret.txt") for _ in range(CALLS)]
        writes = [
            await coding_direct(tools["write"], path=f"d/new-{n}.txt", content="written\n")
            for n in range(CALLS)
        ]
        await until_one_succeeds("read", reads, path="d/secret.txt")
        await until_one_succeeds("write", writes, path="d/more-{n}.txt", content="written\n")
    finally:
        stop.set()
        swapper.join()

    leaked_reads = sum("outside secret" in result.text for result in reads)
    leaked_writes = len(list((coding_outside / "d").glob("*-*.txt")))
    served = sum(not result.is_error for result in reads)
    written = sum(not result.is_error for result in writes)
    print(
        f"\n{swaps} swaps: {leaked_reads}/{len(reads)} reads leaked ({served} served from inside), "
        f"{leaked_writes}/{len(writes)} writes landed outside ({written} written inside)"
    )
    assert leaked_reads == 0
    assert leaked_writes == 0
    assert sorted(p.name for p in (coding_outside / "d").iterdir()) == ["secret.txt"]
    assert served > 0 and written > 0  # the swap did not simply refuse everything


async def test_fifos_and_symlink_loops_cannot_hang_a_call(
    coding_ws: Path, coding_call: Any
) -> None:
    os.mkfifo(coding_ws / "pipe")
    (coding_ws / "loop").symlink_to("loop")
    (coding_ws / "a.txt").write_text("needle\n")

    read_pipe, edit_pipe, grep_all, read_loop = await coding_call(
        ("read", {"path": "pipe"}),
        ("edit", {"path": "pipe", "old_text": "a", "new_text": "b"}),
        ("grep", {"pattern": "needle"}),
        ("read", {"path": "loop"}),
        file_timeout_s=5,
    )

    assert read_pipe.is_error and read_pipe.text == "pipe is not a regular file"
    assert edit_pipe.is_error and edit_pipe.text == "pipe is not a regular file"
    assert grep_all.text == "a.txt:1: needle"
    assert read_loop.is_error and "too many levels of symbolic links" in read_loop.text
