"""bash runs with a scrubbed environment: the agent's secrets never reach the model."""

from __future__ import annotations

from typing import Any

import pytest

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
    assert {"PATH", "HOME", "LC_ALL", "MAINSPRING_WORKSPACE", "PAGER"} <= names


async def test_more_names_pass_through_only_as_configured(
    coding_call: Any, coding_secret_env: None
) -> None:
    (result,) = await coding_call(
        ("bash", {"command": 'echo "$MY_SETTING|$MY_TOKEN|$OPENAI_API_KEY|$GITHUB_TOKEN"'}),
        bash_env_passthrough=["MY_*", "OPENAI_API_KEY", "*TOKEN*"],
    )

    # a pattern never lets a secret-looking name through; an exact name does
    assert result.text == "visible||sk-openai-secret|\n[exit code: 0]"
