"""The command line follows ``llm``'s conventions where they fit.

``-m/--model``, ``-s/--system``, ``-o KEY VALUE``; ``mainspring`` alone helps (exit 0) and
a bare prompt runs; options on either side of the command; ``run`` without a prompt shows
``run``'s usage; ``tools show A B``; the unseen-tools note once per data directory, on
one line; ``config --all`` loads back; every configuration problem (a missing API key
too) is exit 2 and ``mainspring: error:``; ``models`` asks an OpenAI-compatible server
for its list and leaves the test-only ``faux`` provider out; ``install-model`` writes
its progress on stderr and refuses a model it does not know; in ``chat``, ``-o`` options
follow ``/model`` to another provider; plugins turned off are reported once.
"""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import threading
from collections.abc import Iterator
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from cli_in_process import run_cli

ECHO = '''
from mainspring import hookimpl, tool
from mainspring.testing import FauxProvider, faux

name = "echo"


def _echo(request):
    return faux.text(f"heard: {request.messages[-1].text} | system: {request.system_prompt}")


@tool
def shout(text: str) -> str:
    """Upper-case the text."""
    return text.upper()


@tool
def whisper(text: str) -> str:
    """Lower-case the text."""
    return text.lower()


@hookimpl
def register_providers():
    return [FauxProvider([_echo] * 10, name="echo")]


@hookimpl
def register_tools(agent):
    return [shout, whisper]
'''


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "echo_plugin.py").write_text(ECHO)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
    env["MAINSPRING_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    env["MAINSPRING_DATA_DIR"] = str(tmp_path / "data")
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    for name in ("MAINSPRING_MODEL", "MAINSPRING_CONFIG", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        env.pop(name, None)
    return env


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(args, env)


def test_mainspring_alone_prints_help(env: dict[str, str]) -> None:
    done = cli(env)

    assert done.returncode == 0
    assert done.stdout.startswith("usage: mainspring") and "run" in done.stdout


def test_a_bare_prompt_is_run_with_short_options_before_or_after_it(env: dict[str, str]) -> None:
    common = ("--plugin", "echo_plugin", "--no-session")

    before = cli(env, "-m", "echo:x", "-s", "be brief", *common, "what is 2+2?")
    after = cli(env, "what is 2+2?", "-m", "echo:x", "--system", "be brief", *common)

    for done in (before, after):
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "heard: what is 2+2? | system: be brief"


def test_options_are_accepted_before_and_after_the_command(env: dict[str, str]) -> None:
    before = cli(
        env, "--log-level", "DEBUG", "-m", "echo:x", "run", "hi", "--plugin", "echo_plugin"
    )
    after = cli(env, "run", "hi", "--plugin", "echo_plugin", "-m", "echo:x", "--log-level", "DEBUG")

    for done in (before, after):
        assert done.returncode == 0, done.stderr
        assert "heard: hi" in done.stdout
        assert "debug" in done.stderr.lower()  # the log level took effect


def test_run_without_a_prompt_prints_runs_usage(env: dict[str, str]) -> None:
    done = cli(env, "run")

    assert done.returncode == 2
    assert done.stderr.startswith("usage: mainspring run")
    assert "no prompt" in done.stderr


def test_tools_show_takes_several_names(env: dict[str, str]) -> None:
    done = cli(env, "tools", "show", "shout", "whisper", "--plugin", "echo_plugin")

    assert done.returncode == 0, done.stderr
    assert "Upper-case the text." in done.stdout and "Lower-case the text." in done.stdout


def test_a_provider_option_reaches_the_providers_settings(env: dict[str, str]) -> None:
    done = cli(env, "run", "hi", "-o", "no_such_option", "1", "--no-session")

    assert done.returncode == 2
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith("mainspring: error: ") and "no_such_option" in line


def test_a_missing_api_key_is_a_configuration_error(env: dict[str, str]) -> None:
    done = cli(env, "run", "hi", "-m", "openai:gpt-4o", "--no-session")

    assert done.returncode == 2
    assert done.stdout == ""
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith("mainspring: error: openai:gpt-4o (--model): OPENAI_API_KEY is not set")


def test_the_unseen_tools_note_is_one_line_once_per_data_directory(
    env: dict[str, str], tmp_path: Path
) -> None:
    pytest.importorskip("xllamacpp")
    # the local provider's default tool_mode keeps tools from its model: the note's cause
    first = cli(env, "run", "hi", "-m", "local:smollm2-135m", "--plugin", "echo_plugin")
    notes = [line for line in first.stderr.splitlines() if line.startswith("mainspring: note:")]
    assert len(notes) == 1 and "2 tools installed, but" in notes[0]
    assert "how to change it: mainspring tools" in notes[0] and len(notes[0]) < 200

    again = cli(env, "run", "hi", "-m", "local:smollm2-135m", "--plugin", "echo_plugin")

    assert "mainspring: note:" not in again.stderr
    assert (tmp_path / "data" / "notes").is_dir()


def test_config_all_loads_back(env: dict[str, str], tmp_path: Path) -> None:
    shown = cli(env, "config", "--all")
    assert shown.returncode == 0, shown.stderr
    saved = tmp_path / "saved.toml"
    saved.write_text(shown.stdout)

    again = cli({**env, "MAINSPRING_CONFIG": str(saved)}, "config", "--all")

    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[1:] == shown.stdout.splitlines()[1:]


class _Models(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps({"object": "list", "data": [{"id": "served-a"}, {"id": "served-b"}]})
        self.send_response(200 if self.path == "/v1/models" else 404)
        self.send_header("content-type", "application/json")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def models_server() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Models)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_models_asks_an_openai_compatible_server_and_hides_faux(
    env: dict[str, str], models_server: str
) -> None:
    done = cli({**env, "OPENAI_BASE_URL": models_server}, "models")

    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "openai:served-a  (listed by the server)" in lines
    assert "openai:served-b  (listed by the server)" in lines
    assert not any(line.startswith("faux") for line in lines)


def test_install_model_writes_its_progress_on_stderr(env: dict[str, str]) -> None:
    pytest.importorskip("xllamacpp")
    done = cli(env, "install-model")  # installed already: it says so, and installs nothing

    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert "already installed" in done.stderr


OPTIONS_ECHO = """
from mainspring import hookimpl
from mainspring.testing import FauxProvider, faux

name = "options_echo"


def _reporting(agent, provider):
    def reply(request):
        config = agent.settings.providers.get(provider)
        options = dict(config.options) if config is not None else {}
        return faux.text(f"{provider} options: {options}")

    return reply


@hookimpl
def register_providers(agent):
    return [FauxProvider([_reporting(agent, name)] * 5, name=name) for name in ("first", "second")]
"""


def test_chat_keeps_the_provider_options_when_model_switches_provider(
    env: dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / "options_echo.py").write_text(OPTIONS_ECHO)
    config = tmp_path / "config.toml"
    config.write_text("[providers.second]\noptions = {}\n")
    env["MAINSPRING_CONFIG"] = str(config)
    args = ("chat", "-m", "first:x", "-o", "temperature", "0.2", "--plugin", "options_echo")
    done = run_cli(
        [*args, "--no-session"], env, stdin="hi\n/model second:y\nhi again\n/model first:z\nend\n"
    )

    assert done.returncode == 0, done.stderr
    replies = [line for line in done.stdout.splitlines() if "options:" in line]
    assert replies == [
        "first options: {'temperature': 0.2}",
        "second options: {'temperature': 0.2}",
        "first options: {'temperature': 0.2}",
    ]
    assert "model: second:y" in done.stderr


def test_chat_leaves_the_option_out_for_a_provider_that_does_not_take_it(
    env: dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / "options_echo.py").write_text(OPTIONS_ECHO)
    args = ("chat", "-m", "first:x", "-o", "temperature", "0.2", "--plugin", "options_echo")
    done = run_cli([*args, "--no-session"], env, stdin="hi\n")

    assert done.returncode == 0, done.stderr  # the local provider takes no temperature
    assert "first options: {'temperature': 0.2}" in done.stdout


def test_plugins_turned_off_are_reported_once(env: dict[str, str]) -> None:
    installed = {entry.name for entry in entry_points(group="mainspring")}
    if not installed:
        pytest.skip("no plugin is installed, so autoload turns none off")
    done = cli(env, "run", "hi", "-m", "echo:x", "--plugin", "echo_plugin", "--no-session")

    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert len([line for line in lines if "MAINSPRING_DISABLE_PLUGIN_AUTOLOAD" in line]) == 1
    (report,) = [line for line in lines if line.startswith("mainspring: plugins off: ")]
    assert all(name in report for name in installed)


def test_install_model_refuses_a_model_it_does_not_know(env: dict[str, str]) -> None:
    done = cli(env, "install-model", "--model", "qwen-7b")

    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("mainspring: error: unknown local model 'qwen-7b'; the known models")
    assert "smollm2-135m" in line and "gemma-3-270m" in line
