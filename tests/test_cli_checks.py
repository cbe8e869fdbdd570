"""What the command line is given is checked, and a problem is one sentence naming the
option, variable or key and what it accepts; the listing commands keep working."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from cli_in_process import run_cli
from mainspring.messages import UserMessage
from mainspring.providers.base import Model, ModelRequest, ProviderError
from mainspring.providers.local import LOCAL_MODEL_ID, LocalProvider
from mainspring.signal import AbortSignal

CATALOGUED = """
from mainspring import hookimpl
from mainspring.providers.base import Model
from mainspring.testing import FauxProvider, faux

name = "catalogued"

@hookimpl
def register_providers():
    provider = FauxProvider([faux.text("answered")], name="cat")
    provider.models = {"known-1": Model(provider="cat", id="known-1")}
    return [provider]
"""


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "catalogued_plugin.py").write_text(CATALOGUED)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
    env["MAINSPRING_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    env.pop("MAINSPRING_MODEL", None)
    env["MAINSPRING_CONFIG"] = str(tmp_path / "config.toml")
    (tmp_path / "config.toml").write_text("")
    return env


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli([*args, "--plugin", "catalogued_plugin"], env)


def last_line(done: subprocess.CompletedProcess[str]) -> str:
    return done.stderr.strip().splitlines()[-1]


def test_the_local_provider_refuses_an_id_it_does_not_serve(env: dict[str, str]) -> None:
    done = cli(env, "run", "hi", "--model", "local:gpt-4")

    assert done.returncode == 2
    assert last_line(done) == (
        "mainspring: error: --model: the local provider does not serve 'gpt-4'; "
        f"it serves local:{LOCAL_MODEL_ID}, local:gemma-3-270m"
    )


async def test_the_local_provider_refuses_a_request_for_another_id() -> None:
    provider = LocalProvider()
    request = ModelRequest(
        model=Model(provider="local", id="gpt-4"), messages=(UserMessage(content="hi"),)
    )
    with pytest.raises(ProviderError, match=f"serves local:{LOCAL_MODEL_ID}") as raised:
        async for _ in provider.stream(request, AbortSignal()):
            pass
    assert not raised.value.retryable


def test_an_id_outside_an_open_catalogue_is_a_warning(env: dict[str, str]) -> None:
    done = cli(env, "run", "hi", "--model", "cat:unknown-2")

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "answered"
    assert (
        "mainspring: warning: cat:unknown-2 (--model) is not among the models the cat "
        "provider knows (cat:known-1); trying it anyway"
    ) in done.stderr


def test_a_known_id_gets_no_warning(env: dict[str, str]) -> None:
    done = cli(env, "run", "hi", "--model", "cat:known-1")

    assert done.returncode == 0, done.stderr
    assert "warning: cat:" not in done.stderr


def test_a_malformed_model_variable_is_named_and_listing_still_works(
    env: dict[str, str],
) -> None:
    env["MAINSPRING_MODEL"] = "bogus"

    listed = cli(env, "plugins")
    tools = cli(env, "tools")
    ran = cli(env, "run", "hi")

    assert listed.returncode == 0 and "catalogued" in listed.stdout, listed.stderr
    assert tools.returncode == 0, tools.stderr
    assert "warning: $MAINSPRING_MODEL is 'bogus'" in listed.stderr
    assert ran.returncode == 2
    assert last_line(ran).startswith("mainspring: error: $MAINSPRING_MODEL is 'bogus'; give ")


def test_an_unknown_provider_in_the_config_file_names_the_file(
    env: dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / "config.toml").write_text('default_model = "nowhere:x"\n')

    done = cli(env, "run", "hi")

    assert done.returncode == 2
    assert last_line(done).startswith(
        "mainspring: error: default_model in "
        f'{tmp_path / "config.toml"}: unknown provider "nowhere"'
    )


def test_no_plugin_naming_no_plugin_is_an_error_for_run_and_a_warning_for_lists(
    env: dict[str, str],
) -> None:
    ran = cli(env, "run", "hi", "--model", "cat:known-1", "--no-plugin", "nosuch")
    listed = cli(env, "tools", "--no-plugin", "nosuch")

    assert ran.returncode == 2
    assert last_line(ran).startswith(
        "mainspring: error: --no-plugin nosuch: no plugin of that name"
    )
    assert "catalogued" in last_line(ran)  # the names there are
    assert listed.returncode == 0
    assert "warning: --no-plugin nosuch: no plugin of that name" in listed.stderr


def test_a_known_plugin_name_is_accepted(env: dict[str, str]) -> None:
    done = cli(env, "run", "hi", "--model", "cat:known-1", "--no-plugin", "max-turns")

    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("option", "complaint"),
    [
        ('tool_mode = "x"', "tool_mode = 'x' is not allowed; use 'off', 'force_first', 'auto'"),
        (
            'turn_format = "llama3"',
            "turn_format = 'llama3' is not allowed; use 'chatml', 'gemma'",
        ),
        ('model_file = ""', "model_file = '' is not allowed; give a path to a .gguf file"),
        ("model_id = 7", "model_id = 7 is not allowed; give a model id"),
    ],
)
def test_a_local_option_that_is_not_allowed_is_named_with_what_is(
    env: dict[str, str], tmp_path: Path, option: str, complaint: str
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f"[providers.local]\noptions = {{{option}}}\n")

    done = cli(env, "run", "hi")

    assert done.returncode == 2
    assert last_line(done) == f"mainspring: error: {config}: providers.local.options.{complaint}"


def test_another_local_model_is_configured_by_file_id_and_turn_format(
    env: dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / "config.toml").write_text(
        "[providers.local]\n"
        'options = {model_file = "~/models/tiny.gguf", model_id = "tiny", turn_format = "gemma"}\n'
    )
    listed = cli(env, "models")
    assert listed.returncode == 0, listed.stderr
    assert "local:tiny" in listed.stdout
    assert "local:smollm2-135m" not in listed.stdout
    # the default model follows; a model file that is not there is named, and installing
    # the default model is not offered as the fix
    ran = cli(env, "run", "hi")
    assert ran.returncode == 1
    assert "models/tiny.gguf given as the local provider's model_file does not exist" in ran.stderr
    assert "~" not in ran.stderr
    assert "install-model" not in ran.stderr


def test_tools_the_local_model_will_not_see_get_a_note() -> None:
    from mainspring import Agent, tool
    from mainspring.cli.checks import unused_tools_note
    from mainspring.testing import FauxProvider

    @tool
    def greet(name: str) -> str:
        """Greet someone."""
        return f"hello {name}"

    def note(provider: object, tools: list[object]) -> str | None:
        agent = Agent(model="local:smollm2-135m", provider=provider, tools=tools, autoload=False)
        return unused_tools_note(agent)

    off = note(LocalProvider(), [greet])
    assert off is not None
    assert off.startswith("1 tool installed, but local:smollm2-135m does not see the tools")
    assert 'tool_mode = "force_first"' in off
    assert note(LocalProvider(tool_mode="force_first"), [greet]) is None
    assert note(LocalProvider(), []) is None  # nothing to miss
    assert note(FauxProvider([], name="local"), [greet]) is None  # no tool_support: no note
