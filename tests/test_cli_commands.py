"""The command's smaller subcommands and options, run as a subprocess: ``--version``,
``models``, ``config``, ``new-plugin``, the prompt from standard input, ``--plugin
MODULE:ATTR``, and warnings printed like the command's other messages."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

import mainspring
from cli_in_process import run_cli

ECHO = """
from mainspring import Model, hookimpl
from mainspring.testing import FauxProvider, faux


def _echo(request):
    return faux.text("heard: " + request.messages[-1].text)


class EchoPlugin:
    name = "echo"

    @hookimpl
    def register_providers(self):
        catalogue = {"small": Model(provider="echo", id="small", context_window=4096,
                                    max_output_tokens=256, reasoning=True)}
        return [FauxProvider([_echo], name="echo", models=catalogue)]


PLUGIN = EchoPlugin()
NOT_A_PLUGIN = object()
"""


def cli(
    tmp_path: Path, *args: str, stdin: str | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    (tmp_path / "echo_plugin.py").write_text(ECHO)
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join([str(tmp_path), environment.get("PYTHONPATH", "")])
    environment["MAINSPRING_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    environment["XDG_CONFIG_HOME"] = str(tmp_path)
    for name in ("MAINSPRING_MODEL", "MAINSPRING_CONFIG"):
        environment.pop(name, None)
    environment.update(env)
    return run_cli(args, environment, stdin=stdin, cwd=tmp_path)


def test_version(tmp_path: Path) -> None:
    done = cli(tmp_path, "--version")
    assert done.returncode == 0
    assert done.stdout.startswith(f"mainspring {mainspring.__version__} (Python ")


def test_models_lists_each_provider_and_its_catalogue(tmp_path: Path) -> None:
    done = cli(tmp_path, "models", "--plugin", "echo_plugin:PLUGIN")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "echo:small  (context 4096, output 256, reasoning)" in lines
    assert "openai  (any model id: openai:MODEL-ID)" in lines
    assert any(line.startswith("local:") for line in lines)
    as_json = json.loads(cli(tmp_path, "models", "--json", "--plugin", "echo_plugin:PLUGIN").stdout)
    [echo] = [row for row in as_json if row["provider"] == "echo"]
    assert [model["id"] for model in echo["models"]] == ["small"]


def test_models_says_which_local_models_are_not_installed_and_how(tmp_path: Path) -> None:
    empty = tmp_path / "no-models"
    empty.mkdir()
    done = cli(tmp_path, "models", MAINSPRING_MODELS_DIR=str(empty))
    assert done.returncode == 0, done.stderr
    assert (
        "local:gemma-3-270m  (context 8192, output 1024; not installed: "
        "mainspring install-model --model gemma-3-270m)"
    ) in done.stdout.splitlines()
    as_json = json.loads(cli(tmp_path, "models", "--json", MAINSPRING_MODELS_DIR=str(empty)).stdout)
    [local] = [row for row in as_json if row["provider"] == "local"]
    install = {model["id"]: model["install"] for model in local["models"]}
    assert install["gemma-3-270m"] == "mainspring install-model --model gemma-3-270m"


def test_the_prompt_is_read_from_stdin(tmp_path: Path) -> None:
    args = ("run", "--model", "echo:small", "--plugin", "echo_plugin:PLUGIN")
    done = cli(tmp_path, *args, "summarise", stdin="line one\nline two\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "heard: summarise\n\nline one\nline two"
    alone = cli(tmp_path, *args, stdin="only the notes\n")
    assert alone.stdout.strip() == "heard: only the notes"


def test_no_prompt_at_all_is_a_usage_error(tmp_path: Path) -> None:
    done = cli(tmp_path, "run", "--model", "echo:small", "--plugin", "echo_plugin:PLUGIN")
    assert done.returncode == 2
    assert "no prompt" in done.stderr


def test_plugin_accepts_module_and_attribute(tmp_path: Path) -> None:
    missing = cli(tmp_path, "tools", "--plugin", "echo_plugin:MISSING")
    assert missing.returncode == 2
    assert "echo_plugin:MISSING" in missing.stderr and "AttributeError" in missing.stderr
    hookless = cli(tmp_path, "tools", "--plugin", "echo_plugin:NOT_A_PLUGIN")
    assert hookless.returncode == 0, hookless.stderr
    assert "mainspring: warning: --plugin echo_plugin:NOT_A_PLUGIN implements no hook" in (
        hookless.stderr
    )


def config_file(tmp_path: Path) -> Path:
    (tmp_path / "mainspring").mkdir(exist_ok=True)
    return tmp_path / "mainspring" / "config.toml"


def test_config_shows_its_path_and_masks_secrets(tmp_path: Path) -> None:
    config_file(tmp_path).write_text(
        'default_model = "openai:gpt-4o-mini"\n'
        "[compaction]\nreserve_tokens = 1000\n"
        '[providers.openai]\napi_key = "sk-very-secret"\nbase_url = "http://localhost:1/v1"\n'
        '[plugin_options."my-plugin"]\ngithub_token = "ghp-secret"\nlimit = 3\n'
    )
    done = cli(tmp_path, "config")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"# config file: {config_file(tmp_path)}\n")
    assert "secret" not in done.stdout
    assert 'default_model = "openai:gpt-4o-mini"' in done.stdout
    assert "reserve_tokens = 1000" in done.stdout
    assert "[plugin_options.my-plugin]" in done.stdout and "limit = 3" in done.stdout
    shown = json.loads(cli(tmp_path, "config", "--json").stdout)
    assert shown["exists"] is True
    assert shown["settings"]["providers"]["openai"]["base_url"] == "http://localhost:1/v1"
    assert "secret" not in json.dumps(shown)


def test_config_without_a_file(tmp_path: Path) -> None:
    done = cli(tmp_path, "config")
    assert "(not found: the defaults apply)" in done.stdout
    assert "max_turns = 200" in cli(tmp_path, "config", "--all").stdout


def test_warnings_print_like_the_other_messages(tmp_path: Path) -> None:
    done = cli(tmp_path, "tools", "--no-plugin", "max_turns")
    warnings = [line for line in done.stderr.splitlines() if "warning" in line]
    assert warnings, done.stderr
    for line in warnings:
        assert line.startswith("mainspring: warning: "), line


def test_new_plugin_writes_a_package_and_refuses_to_overwrite(tmp_path: Path) -> None:
    done = cli(tmp_path, "new-plugin", "mainspring-weather")
    assert done.returncode == 0, done.stderr
    package = tmp_path / "mainspring-weather"
    pyproject = (package / "pyproject.toml").read_text()
    assert 'mainspring-weather = "mainspring_weather"' in pyproject
    assert (package / "src" / "mainspring_weather" / "__init__.py").exists()
    again = cli(tmp_path, "new-plugin", "mainspring-weather")
    assert again.returncode == 2 and "not empty" in again.stderr
    bad = cli(tmp_path, "new-plugin", "Not A Name")
    assert bad.returncode == 2 and "not a plugin name" in bad.stderr


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("mainspring-policy-pack", "example packs"),
        ("mainspring_policy.pack", "not a plugin name"),
        ("mainspring-policy_pack", "example packs"),
        ("mainspring-summary-compaction", "example packs"),
        ("mainspring", "is installed"),
        ("pydantic", "is installed"),
        ("json", "can already be imported"),
    ],
)
def test_new_plugin_refuses_a_name_that_would_shadow_something(
    tmp_path: Path, name: str, why: str
) -> None:
    done = cli(tmp_path, "new-plugin", name)

    assert done.returncode == 2
    assert done.stderr.startswith("mainspring: error: ") and why in done.stderr
    assert not (tmp_path / name).exists()  # nothing written


def test_the_generated_gate_decides_by_tool_name_not_object(tmp_path: Path) -> None:
    from mainspring import Block
    from mainspring.plugin_template import write_plugin

    target = write_plugin("shout-gate-check", tmp_path / "p")
    namespace: dict[str, object] = {}
    source = (target / "src" / "shout_gate_check" / "__init__.py").read_text()
    exec(compile(source, "shout_gate_check", "exec"), namespace)  # the module, not installed

    @mainspring.tool(name="shout")
    def impostor(text: str) -> str:
        """Another tool of the same name."""
        return text

    agent = mainspring.Agent(model="faux:x", autoload=False)
    gate = namespace["before_tool_call"]
    # gates see every tool's arguments as a read-only ToolArgs mapping
    args = mainspring.ToolArgs({"text": "x" * 500})
    assert isinstance(gate(tool=impostor, args=args, agent=agent), Block)  # type: ignore[operator]
    short = mainspring.ToolArgs({"text": "hi"})
    assert gate(tool=impostor, args=short, agent=agent) is None  # type: ignore[operator]


@pytest.mark.parametrize("name", ["x", "mainspring-hello-2", "a_b"])
def test_plugin_names_that_are_accepted(tmp_path: Path, name: str) -> None:
    from mainspring.plugin_template import module_name, write_plugin

    target = write_plugin(name, tmp_path / name)
    assert (target / "src" / module_name(name) / "__init__.py").exists()
