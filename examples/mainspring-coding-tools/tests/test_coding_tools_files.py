"""read, write, edit, ls and grep: behaviour and errors, through real agent runs."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

# -- read -------------------------------------------------------------------------------


async def test_read_numbers_lines(coding_ws: Path, coding_call: Any) -> None:
    (coding_ws / "a.txt").write_text("alpha\nbeta\ngamma\n")

    (result,) = await coding_call(("read", {"path": "a.txt"}))

    assert not result.is_error
    assert result.text == "     1\talpha\n     2\tbeta\n     3\tgamma"
    assert result.details == {"path": "a.txt", "lines": 3, "first": 1, "last": 3}


async def test_read_offset_and_limit_say_how_to_continue(coding_ws: Path, coding_call: Any) -> None:
    (coding_ws / "a.txt").write_text("".join(f"line {n}\n" for n in range(1, 11)))

    (result,) = await coding_call(("read", {"path": "a.txt", "offset": 4, "limit": 3}))

    lines = result.text.splitlines()
    assert lines[:3] == ["     4\tline 4", "     5\tline 5", "     6\tline 6"]
    assert lines[3] == "[showing lines 4-6 of 10 (the line limit); continue with offset=7]"


async def test_read_caps_the_output_size(coding_ws: Path, coding_call: Any) -> None:
    (coding_ws / "big.txt").write_text("".join(f"{n:04d} {'x' * 90}\n" for n in range(1000)))

    (result,) = await coding_call(("read", {"path": "big.txt"}), read_max_chars=1000)

    assert len(result.text) < 1200
    assert "(the output size limit); continue with offset=" in result.text
    assert result.details["last"] < 1000


async def test_read_cuts_very_long_lines(coding_ws: Path, coding_call: Any) -> None:
    (coding_ws / "long.txt").write_text("y" * 5000 + "\n")

    (result,) = await coding_call(("read", {"path": "long.txt"}), max_line_chars=100)

    assert result.text == f"     1\t{'y' * 100}… [line cut: 5000 characters]"


async def test_read_errors(coding_ws: Path, coding_call: Any) -> None:
    (coding_ws / "dir").mkdir()
    (coding_ws / "bin.dat").write_bytes(b"\x00\x01\x02binary")
    (coding_ws / "empty.txt").write_text("")
    (coding_ws / "short.txt").write_text("one\ntwo\n")

    missing, directory, binary, empty, past_end = await coding_call(
        ("read", {"path": "nope.txt"}),
        ("read", {"path": "dir"}),
        ("read", {"path": "bin.dat"}),
        ("read", {"path": "empty.txt"}),
        ("read", {"path": "short.txt", "offset": 5}),
    )

    assert missing.is_error and missing.text == "nope.txt: no such file"
    assert directory.is_error and "dir is a directory; use ls" in directory.text
    assert binary.is_error and "looks like a binary file" in binary.text
    assert not empty.is_error and empty.text == "empty.txt is empty"
    assert past_end.is_error
    assert past_end.text == "offset 5 is past the end of short.txt, which has 2 lines"


async def test_read_rejects_invalid_arguments(coding_call: Any) -> None:
    (result,) = await coding_call(("read", {"path": "a.txt", "offset": 0}))

    assert result.is_error
    assert 'Invalid arguments for tool "read"' in result.text
    assert "offset" in result.text


# -- write ------------------------------------------------------------------------------


async def test_write_creates_parent_directories(coding_ws: Path, coding_call: Any) -> None:
    (result,) = await coding_call(("write", {"path": "deep/er/new.txt", "content": "hi\nthere"}))

    assert not result.is_error
    assert result.text == "Created deep/er/new.txt (8 bytes, 2 lines)"
    assert (coding_ws / "deep/er/new.txt").read_text() == "hi\nthere"


async def test_write_overwrites_and_keeps_the_mode(coding_ws: Path, coding_call: Any) -> None:
    script = coding_ws / "run.sh"
    script.write_text("old")
    script.chmod(0o755)

    (result,) = await coding_call(("write", {"path": "run.sh", "content": "#!/bin/sh\n"}))

    assert result.text == "Overwrote run.sh (10 bytes, 1 lines)"
    assert script.read_text() == "#!/bin/sh\n"
    assert script.stat().st_mode & 0o777 == 0o755
    assert sorted(os.listdir(coding_ws)) == ["run.sh"]  # no temporary file left behind


async def test_write_refuses_a_directory(coding_ws: Path, coding_call: Any) -> None:
    (coding_ws / "d").mkdir()

    (result,) = await coding_call(("write", {"path": "d", "content": "x"}))

    assert result.is_error and result.text == "d is a directory; give a file path"


async def test_write_under_a_file_is_a_clear_error(coding_ws: Path, coding_call: Any) -> None:
    (coding_ws / "f").write_text("x")

    (result,) = await coding_call(("write", {"path": "f/inner.txt", "content": "x"}))

    assert result.is_error
    assert "f" in result.text


# -- edit -------------------------------------------------------------------------------


async def test_edit_replaces_the_exact_text(coding_ws: Path, coding_call: Any) -> None:
    (coding_ws / "m.py").write_text("def f():\n    return 1\n\n\ndef g():\n    return 2\n")

    (result,) = await coding_call(
        ("edit", {"path": "m.py", "old_text": "    return 2\n", "new_text": "    return 3\n"})
    )

    assert not result.is_error
    assert result.text == "Edited m.py: replaced 2 line(s) at line 6 with 2 line(s)"
    assert (coding_ws / "m.py").read_text().endswith("def g():\n    return 3\n")


async def test_edit_no_match(coding_ws: Path, coding_call: Any) -> None:
    (coding_ws / "m.py").write_text("x = 1\n")

    (result,) = await coding_call(
        ("edit", {"path": "m.py", "old_text": "x  = 1", "new_text": "x = 2"})
    )

    assert result.is_error
    assert result.text.startswith("old_text was not found in m.py. It must match the file")
    assert (coding_ws / "m.py").read_text() == "x = 1\n"


async def test_edit_several_matches_gives_count_and_lines(
    coding_ws: Path, coding_call: Any
) -> None:
    (coding_ws / "m.py").write_text("x = 1\ny = 2\nx = 1\n\nx = 1\n")

    (result,) = await coding_call(
        ("edit", {"path": "m.py", "old_text": "x = 1", "new_text": "x = 9"})
    )

    assert result.is_error
    assert "old_text occurs 3 times in m.py (at lines 1, 3, 5)" in result.text
    assert "exactly once" in result.text
    assert (coding_ws / "m.py").read_text() == "x = 1\ny = 2\nx = 1\n\nx = 1\n"


async def test_edit_other_errors(coding_ws: Path, coding_call: Any) -> None:
    (coding_ws / "crlf.txt").write_bytes(b"one\r\ntwo\r\n")
    (coding_ws / "m.py").write_text("x = 1\n")

    empty, same, crlf, missing = await coding_call(
        ("edit", {"path": "m.py", "old_text": "", "new_text": "y"}),
        ("edit", {"path": "m.py", "old_text": "x", "new_text": "x"}),
        ("edit", {"path": "crlf.txt", "old_text": "one\ntwo", "new_text": "1\n2"}),
        ("edit", {"path": "gone.py", "old_text": "a", "new_text": "b"}),
    )

    assert empty.is_error and "old_text is empty; to create or overwrite a file, use write" in (
        empty.text
    )
    assert same.is_error and "the same" in same.text
    assert crlf.is_error and "CRLF" in crlf.text
    assert missing.is_error and missing.text == "gone.py: no such file"


async def test_edit_keeps_crlf_when_matched_exactly(coding_ws: Path, coding_call: Any) -> None:
    (coding_ws / "crlf.txt").write_bytes(b"one\r\ntwo\r\n")

    (result,) = await coding_call(
        ("edit", {"path": "crlf.txt", "old_text": "two\r\n", "new_text": "2\r\n"})
    )

    assert not result.is_error
    assert (coding_ws / "crlf.txt").read_bytes() == b"one\r\n2\r\n"


# -- ls ---------------------------------------------------------------------------------


async def test_ls_sorts_and_marks_directories(coding_ws: Path, coding_call: Any) -> None:
    (coding_ws / "src").mkdir()
    (coding_ws / "Zeta.txt").write_text("")
    (coding_ws / "alpha.txt").write_text("")
    (coding_ws / ".hidden").write_text("")
    (coding_ws / "to_src").symlink_to(coding_ws / "src")

    root, sub = await coding_call(("ls", {}), ("ls", {"path": "src"}))

    assert root.text.splitlines() == [".hidden", "alpha.txt", "src/", "to_src/", "Zeta.txt"]
    assert sub.text == "src is empty"


async def test_ls_errors_and_cap(coding_ws: Path, coding_call: Any) -> None:
    (coding_ws / "f.txt").write_text("")
    for n in range(5):
        (coding_ws / "many").mkdir(exist_ok=True)
        (coding_ws / "many" / f"{n}.txt").write_text("")

    missing, a_file, capped = await coding_call(
        ("ls", {"path": "nope"}),
        ("ls", {"path": "f.txt"}),
        ("ls", {"path": "many"}),
        ls_max_entries=3,
    )

    assert missing.is_error and missing.text == "nope: no such directory"
    assert a_file.is_error and "is a file, not a directory" in a_file.text
    assert capped.text.splitlines() == [
        "0.txt",
        "1.txt",
        "2.txt",
        "[2 more entries not shown; 5 in all]",
    ]


# -- grep -------------------------------------------------------------------------------


def _tree(root: Path) -> None:
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "pkg" / "mod.py").write_text("import os\n\ndef Needle():\n    pass\n")
    (root / "src" / "notes.md").write_text("a needle in text\n")
    (root / "top.py").write_text("needle = 1\n")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("needle in git\n")
    (root / "blob.bin").write_bytes(b"needle\x00\x00")


async def test_grep_finds_numbered_lines(coding_ws: Path, coding_call: Any) -> None:
    _tree(coding_ws)

    (result,) = await coding_call(("grep", {"pattern": "needle"}))

    assert result.text.splitlines() == ["src/notes.md:1: a needle in text", "top.py:1: needle = 1"]
    assert result.details == {"matches": 2, "files": 2, "capped": False}


async def test_grep_glob_case_and_single_file(coding_ws: Path, coding_call: Any) -> None:
    _tree(coding_ws)

    by_name, by_path, insensitive, one_file = await coding_call(
        ("grep", {"pattern": "needle", "glob": "*.py", "ignore_case": True}),
        ("grep", {"pattern": "needle", "glob": "src/*", "ignore_case": True}),
        ("grep", {"pattern": "NEEDLE", "path": "src", "ignore_case": True}),
        ("grep", {"pattern": r"^def \w+", "path": "src/pkg/mod.py"}),
    )

    assert by_name.text.splitlines() == ["src/pkg/mod.py:3: def Needle():", "top.py:1: needle = 1"]
    assert by_path.text.splitlines() == [
        "src/notes.md:1: a needle in text",
        "src/pkg/mod.py:3: def Needle():",
    ]
    assert insensitive.details["matches"] == 2
    assert one_file.text == "src/pkg/mod.py:3: def Needle():"


async def test_grep_caps_results(coding_ws: Path, coding_call: Any) -> None:
    (coding_ws / "many.txt").write_text("hit\n" * 50)

    (result,) = await coding_call(("grep", {"pattern": "hit"}), grep_max_results=5)

    lines = result.text.splitlines()
    assert lines[:5] == [f"many.txt:{n}: hit" for n in range(1, 6)]
    assert lines[5] == "[stopped at 5 matches; narrow the pattern, the path or the glob]"
    assert result.details["capped"] is True


async def test_grep_errors_and_no_match(coding_ws: Path, coding_call: Any) -> None:
    (coding_ws / "a.txt").write_text("text\n")

    bad, missing, none = await coding_call(
        ("grep", {"pattern": "("}),
        ("grep", {"pattern": "x", "path": "nope"}),
        ("grep", {"pattern": "absent"}),
    )

    assert bad.is_error and bad.text.startswith("invalid regular expression '('")
    assert missing.is_error and missing.text == "nope: no such file or directory"
    assert not none.is_error and none.text == "No matches for 'absent' in ."


async def test_grep_does_not_follow_symlinks_out(
    coding_ws: Path, tmp_path: Path, coding_call: Any
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("needle outside\n")
    (coding_ws / "leak.txt").symlink_to(outside / "secret.txt")
    (coding_ws / "leakdir").symlink_to(outside)
    (coding_ws / "inside.txt").write_text("needle inside\n")

    (result,) = await coding_call(("grep", {"pattern": "needle"}))

    assert result.text == "inside.txt:1: needle inside"
