"""bash runs with a scrubbed environment: the agent's secrets never reach the model."""

from __future__ import annotations

from typing import Any

import pytest

from mainspring import PluginLoadError

SECRETS = {
    "OPENAI_API_KEY": "sk-openai-secret",
    "ANTHROPIC_API_KEY": "sk-ant-secret",
    "GITHUB_TOKEN": "ghp_secret",
    "AWS_SECRET_ACCESS_KEY": "aws-secret",
    "DB_PASSWORD": "db-secret",
    "GOOGLE_APPLICATION_CREDENTIALS": "/creds-secret.json",
}


@pytest.fixture
def coding_secret_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The agent's environment holds secrets, and some harmless settings."""
    for name, value in {**SECRETS, "MY_SETTING": "visible", "MY_TOKEN": "my-secret"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LC_ALL", "C.UTF-8")


async def test_a_command_does_not_see_the_agents_secrets(
    coding_call: Any, coding_secret_env: None
) -> None:
    printed, everything = await coding_call(
        ("bash", {"command": "printenv OPENAI_API_KEY | rev"}),
        ("bash", {"command": "env"}),
    )

    assert printed.text == "(no output)\n[exit code: 0]"
    for value in [*SECRETS.values(), "visible", "my-secret"]:
        assert value not in everything.text
    names = {line.split("=", 1)[0] for line in everything.text.splitlines() if "=" in line}
    assert {"PATH", "HOME", "LC_ALL", "PAGER"} <= names
    assert not any(name.startswith("MAINSPRING_") for name in names)


async def test_more_names_pass_through_only_as_configured(
    coding_call: Any, coding_secret_env: None
) -> None:
    (result,) = await coding_call(
        ("bash", {"command": 'echo "$MY_SETTING|$MY_TOKEN|$OPENAI_API_KEY|$GITHUB_TOKEN"'}),
        bash_env_passthrough=["MY_*", "OPENAI_API_KEY", "*TOKEN*"],
    )

    # a pattern never lets a secret-looking name through; an exact name does
    assert result.text == "visible||sk-openai-secret|\n[exit code: 0]"


async def test_a_command_sees_neither_the_agents_configuration_nor_its_home(
    coding_call: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    home = tmp_path / "home"
    (home / ".local" / "share" / "mainspring").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("MAINSPRING_DATA_DIR", str(home / ".local/share/mainspring"))
    monkeypatch.setenv("MAINSPRING_DATABASE_URL", "postgresql://u:pw@db/runs")
    monkeypatch.setenv("DATABASE_URL", "postgresql://u:pw@db/app")
    monkeypatch.setenv("MAINSPRING_WORKSPACE", "/srv")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local/share"))

    (result,) = await coding_call(
        ("bash", {"command": 'env; echo "home=$HOME"; ls -a ~'}),
        bash_env_passthrough=["DATA*", "MAIN*", "XDG_*"],
    )

    assert "MAINSPRING" not in result.text and "XDG_" not in result.text
    assert "postgresql://" not in result.text
    (shown,) = [line for line in result.text.splitlines() if line.startswith("home=")]
    assert shown != f"home={home}" and ".local" not in result.text


@pytest.mark.parametrize("name", ["MAINSPRING_DATABASE_URL", "DATABASE_URL", "HOME"])
async def test_the_options_refuse_to_pass_the_agents_configuration(
    coding_call: Any, name: str
) -> None:
    with pytest.raises(PluginLoadError, match="never passed to a command"):
        await coding_call(("bash", {"command": "true"}), bash_env_passthrough=[name])
