"""Every tool stays inside the workspace: escapes are refused, normal paths work."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mainspring_coding_tools import ToolFailure, Workspace


@pytest.fixture
def coding_escape_setup(coding_ws: Path, tmp_path: Path) -> Path:
    """A workspace with a file, a subdirectory and symlinks out of it; returns the
    directory outside it."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret\n")
    (coding_ws / "a.txt").write_text("alpha\n")
    (coding_ws / "sub").mkdir()
    (coding_ws / "out_file").symlink_to(outside / "secret.txt")
    (coding_ws / "out_dir").symlink_to(outside)
    (coding_ws / "in_link").symlink_to(coding_ws / "a.txt")
    return outside


ESCAPES = [
    ("../outside/secret.txt", "climbs out of the workspace with '..'"),
    ("sub/../../outside/secret.txt", "climbs out of the workspace with '..'"),
    ("/etc/passwd", "is outside the workspace"),
    ("{outside}/secret.txt", "is outside the workspace"),
    ("out_file", "goes through a symlink that points outside the workspace"),
    ("out_dir/secret.txt", "goes through a symlink that points outside the workspace"),
    ("out_dir/new.txt", "goes through a symlink that points outside the workspace"),
    ("~/secret.txt", "'~' is not expanded"),
    ("~", "'~' is not expanded"),
    ("", "the path is empty"),
]


def _args(tool: str, path: str) -> dict[str, Any]:
    return {
        "read": {"path": path},
        "write": {"path": path, "content": "pwned"},
        "edit": {"path": path, "old_text": "secret", "new_text": "pwned"},
        "ls": {"path": path},
        "grep": {"pattern": "secret", "path": path},
    }[tool]


@pytest.mark.parametrize("tool", ["read", "write", "edit", "ls", "grep"])
@pytest.mark.parametrize(("path", "message"), ESCAPES, ids=[path or "empty" for path, _ in ESCAPES])
async def test_every_escape_is_refused_by_every_file_tool(
    coding_ws: Path, coding_escape_setup: Path, coding_call: Any, tool: str, path: str, message: str
) -> None:
    outside = coding_escape_setup
    path = path.format(outside=outside)

    (result,) = await coding_call((tool, _args(tool, path)))

    assert result.is_error
    assert message in result.text
    assert (outside / "secret.txt").read_text() == "secret\n"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


async def test_paths_inside_the_workspace_work(
    coding_ws: Path, coding_escape_setup: Path, coding_call: Any
) -> None:
    absolute, dotted, linked, written = await coding_call(
        ("read", {"path": str(coding_ws / "a.txt")}),
        ("read", {"path": "sub/../a.txt"}),
        ("read", {"path": "in_link"}),
        ("write", {"path": "./sub/new.txt", "content": "new"}),
    )

    assert [absolute.text, dotted.text, linked.text] == ["     1\talpha"] * 3
    assert not written.is_error
    assert (coding_ws / "sub" / "new.txt").read_text() == "new"


async def test_writing_through_an_inside_symlink_writes_its_target(
    coding_ws: Path, coding_escape_setup: Path, coding_call: Any
) -> None:
    (result,) = await coding_call(("write", {"path": "in_link", "content": "changed\n"}))

    assert not result.is_error
    assert (coding_ws / "in_link").is_symlink()
    assert (coding_ws / "a.txt").read_text() == "changed\n"


async def test_bash_runs_in_the_workspace_root(coding_ws: Path, coding_call: Any) -> None:
    (result,) = await coding_call(("bash", {"command": "pwd -P"}))

    assert result.text.splitlines()[0] == str(Workspace(coding_ws).root)


def test_workspace_resolution_rules(coding_ws: Path, coding_escape_setup: Path) -> None:
    workspace = Workspace(coding_ws)

    assert workspace.resolve(".") == coding_ws.resolve()
    assert workspace.resolve("sub/x/y.txt") == coding_ws.resolve() / "sub/x/y.txt"
    assert workspace.display(workspace.resolve("sub/x")) == "sub/x"
    with pytest.raises(ToolFailure, match="NUL"):
        workspace.resolve("a\x00b")
    with pytest.raises(ToolFailure, match="climbs out"):
        workspace.resolve("..")


def test_a_missing_workspace_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="is not an existing directory"):
        Workspace(tmp_path / "missing")
