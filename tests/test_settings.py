"""Settings: defaults, the config file, the environment, secrets kept out of reprs."""

from __future__ import annotations

from pathlib import Path

import pytest

from mainspring import Agent
from mainspring.settings import Settings, load_settings
from mainspring.testing import FauxProvider, faux


def test_defaults_follow_the_contract() -> None:
    settings = Settings()
    assert settings.retry.max_attempts == 3
    assert settings.retry.base_delay_s == 1.0
    assert settings.retry.max_delay_s == 30.0
    assert settings.compaction.reserve_for(128_000) == 16_384
    assert settings.compaction.reserve_for(8_192) == 2_048
    assert settings.max_turns == 200


def test_config_file_and_environment(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        'default_model = "anthropic:claude-x"\n'
        "max_turns = 7\n"
        "[retry]\nmax_attempts = 1\n"
        '[providers.openai]\nbase_url = "http://127.0.0.1:9/v1"\napi_key = "sk-secret-123"\n'
        "options = { temperature = 0 }\n"
    )
    settings = load_settings(config, environ={})
    assert settings.default_model == "anthropic:claude-x"
    assert settings.max_turns == 7
    assert settings.retry.max_attempts == 1
    openai = settings.providers["openai"]
    assert openai.base_url == "http://127.0.0.1:9/v1"
    assert openai.api_key is not None
    assert openai.api_key.get_secret_value() == "sk-secret-123"
    assert "sk-secret-123" not in repr(settings)
    assert "sk-secret-123" not in str(settings.model_dump())

    from_env = load_settings(environ={"MAINSPRING_CONFIG": str(config), "MAINSPRING_MODEL": "x:y"})
    assert from_env.default_model == "x:y"


def test_no_config_file_gives_defaults(tmp_path: Path) -> None:
    assert load_settings(environ={"XDG_CONFIG_HOME": str(tmp_path)}) == Settings()


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("max_turns = [", "is not valid TOML"),
        ("max_turns = 0", "invalid settings"),
        ("bogus = 1", "bogus"),
    ],
)
def test_bad_config_files_are_clear_errors(tmp_path: Path, content: str, words: str) -> None:
    config = tmp_path / "config.toml"
    config.write_text(content)
    with pytest.raises(ValueError, match=words):
        load_settings(config, environ={})


def test_a_missing_config_file_named_by_the_variable_says_so(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.toml"
    with pytest.raises(ValueError) as raised:
        load_settings(environ={"MAINSPRING_CONFIG": str(missing)})
    assert str(raised.value) == (
        f"cannot read the config file {missing} ($MAINSPRING_CONFIG): it does not exist"
    )


def test_provider_settings_reach_the_bundled_providers() -> None:
    settings = Settings.model_validate(
        {"providers": {"openai": {"base_url": "http://127.0.0.1:9/v1", "api_key": "sk-abc"}}}
    )
    agent = Agent(model="openai:gpt-x", settings=settings, autoload=False)
    openai = agent.providers["openai"]
    assert "sk-abc" not in repr(openai)
    assert getattr(openai, "base_url", "").startswith("http://127.0.0.1:9")


def test_default_model_comes_from_settings() -> None:
    agent = Agent(
        provider=None,
        settings=Settings(default_model="faux:scripted"),
        autoload=False,
    )
    assert agent.state.model.ref == "faux:scripted"
    other = Agent(model="faux:t", provider=FauxProvider([faux.text("x")]), autoload=False)
    assert other.state.model.ref == "faux:t"


def test_config_errors_are_sentences_naming_the_file_and_key(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('steering_mod = "all"\n\n[retry]\nmax_attempts = "many"\n')

    with pytest.raises(ValueError) as caught:
        load_settings(config, environ={})

    message = str(caught.value)
    assert str(config) in message
    assert "unknown key 'steering_mod' (a typo?)" in message
    assert "retry.max_attempts:" in message
    assert "pydantic" not in message and "https://" not in message
