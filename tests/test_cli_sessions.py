"""Conversations kept by default, ``-c/--continue``, ``mainspring sessions``, and session
files that cannot be used failing before the run with one sentence."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from cli_in_process import run_cli
from mainspring import Agent
from mainspring.sessions import SessionAccessError
from mainspring.settings import Settings
from mainspring.testing import FauxProvider, faux

ECHO = '''
from mainspring import hookimpl
from mainspring.messages import UserMessage
from mainspring.providers.base import StreamDone, TextDelta

name = "echo"


class Echo:
    """Replies with every user message of the conversation so far."""

    name = "echo"
    models = {}

    async def stream(self, request, signal):
        users = [m.content for m in request.messages if isinstance(m, UserMessage)]
        yield TextDelta("heard: " + " | ".join(users))
        yield StreamDone("stop")


@hookimpl
def register_providers():
    return [Echo()]
'''


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "echo_plugin.py").write_text(ECHO)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
    env["MAINSPRING_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    env["MAINSPRING_DATA_DIR"] = str(tmp_path / "data")
    return env


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(args, env)


def run(env: dict[str, str], prompt: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return cli(env, "run", prompt, "--plugin", "echo_plugin", "--model", "echo:x", *extra)


def test_conversations_are_kept_and_continued(env: dict[str, str]) -> None:
    first = run(env, "name a colour")
    assert first.returncode == 0, first.stderr
    kept = list((Path(env["MAINSPRING_DATA_DIR"]) / "sessions").glob("*.jsonl"))
    assert len(kept) == 1

    second = run(env, "and another", "-c")

    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == "heard: name a colour | and another"
    assert list((Path(env["MAINSPRING_DATA_DIR"]) / "sessions").glob("*.jsonl")) == kept


def test_no_session_keeps_nothing(env: dict[str, str]) -> None:
    done = run(env, "hello", "--no-session")

    assert done.returncode == 0, done.stderr
    assert not (Path(env["MAINSPRING_DATA_DIR"]) / "sessions").exists() or not list(
        (Path(env["MAINSPRING_DATA_DIR"]) / "sessions").glob("*.jsonl")
    )


def test_continue_without_a_conversation_is_a_usage_error(env: dict[str, str]) -> None:
    done = run(env, "hello", "--continue")

    assert done.returncode == 2
    assert "no conversation yet" in done.stderr


def test_sessions_lists_and_shows_conversations(env: dict[str, str]) -> None:
    assert run(env, "first conversation").returncode == 0
    assert run(env, "second conversation").returncode == 0

    listed = cli(env, "sessions")
    rows = json.loads(cli(env, "sessions", "--json").stdout)

    assert listed.returncode == 0, listed.stderr
    assert [row["title"] for row in rows] == ["second conversation", "first conversation"]
    assert rows[0]["model"] == "echo:x" and rows[0]["messages"] == 2
    assert rows[0]["id"] in listed.stdout and "first conversation" in listed.stdout

    shown = cli(env, "sessions", "show", rows[1]["id"][:-2])

    assert shown.returncode == 0, shown.stderr
    assert "user: first conversation" in shown.stdout
    assert "assistant: heard: first conversation" in shown.stdout


def test_showing_an_unknown_conversation_says_so(env: dict[str, str]) -> None:
    done = cli(env, "sessions", "show", "nosuch")

    assert done.returncode == 2
    assert "no conversation 'nosuch'" in done.stderr


@pytest.mark.parametrize("key", ["full", "prefix", "latest"])
def test_session_resumes_a_kept_conversation_by_id_prefix_or_latest(
    env: dict[str, str], key: str
) -> None:
    assert run(env, "name a colour").returncode == 0
    [kept] = (Path(env["MAINSPRING_DATA_DIR"]) / "sessions").glob("*.jsonl")
    given = {"full": kept.stem, "prefix": kept.stem[:-2], "latest": "latest"}[key]

    second = run(env, "and another", "--session", given)

    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == "heard: name a colour | and another"
    assert list((Path(env["MAINSPRING_DATA_DIR"]) / "sessions").glob("*.jsonl")) == [kept]


def test_session_with_an_unknown_id_is_an_error_and_makes_no_file(
    env: dict[str, str], tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()

    done = run_cli(
        ["run", "hi", "--plugin", "echo_plugin", "--model", "echo:x", "--session", "nosuch"],
        env,
        cwd=work,
    )

    assert done.returncode == 2
    assert "mainspring: error: no conversation 'nosuch'" in done.stderr
    assert list(work.iterdir()) == []


def test_sessions_show_latest(env: dict[str, str]) -> None:
    assert run(env, "first conversation").returncode == 0
    assert run(env, "second conversation").returncode == 0

    shown = cli(env, "sessions", "show", "latest")

    assert shown.returncode == 0, shown.stderr
    assert "user: second conversation" in shown.stdout


def test_a_session_path_is_a_file_even_when_it_does_not_exist(
    env: dict[str, str], tmp_path: Path
) -> None:
    done = run(env, "hello", "--session", str(tmp_path / "new.jsonl"))

    assert done.returncode == 0, done.stderr
    assert (tmp_path / "new.jsonl").exists()


@pytest.mark.parametrize("where", ["a-file/session.jsonl", "a-directory"])
def test_an_unusable_session_path_is_one_line_and_exit_2(
    env: dict[str, str], tmp_path: Path, where: str
) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    (tmp_path / "a-directory").mkdir()
    done = run(env, "hello", "--session", str(tmp_path / where))

    assert done.returncode == 2
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith(f"mainspring: error: the session file {tmp_path / where} cannot be")
    assert "Errno" not in line


def test_a_read_only_session_file_is_refused_when_the_agent_is_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "session.jsonl"
    path.touch()
    real_open = os.open

    def read_only(name: str, flags: int, *args: int) -> int:
        if os.fspath(name) == str(path) and flags & (os.O_WRONLY | os.O_RDWR):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(name, flags, *args)

    monkeypatch.setattr(os, "open", read_only)

    with pytest.raises(SessionAccessError, match="cannot be written: permission denied"):
        Agent(
            model="faux:x",
            provider=FauxProvider([faux.text("hi")]),
            autoload=False,
            settings=Settings(session_path=str(path)),
        )


def test_an_unwritable_directory_is_refused_when_the_agent_is_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "access", lambda *args, **kwargs: False)

    with pytest.raises(SessionAccessError, match="is not writable"):
        Agent(
            model="faux:x",
            provider=FauxProvider([faux.text("hi")]),
            autoload=False,
            settings=Settings(session_path=str(tmp_path / "new" / "session.jsonl")),
        )
