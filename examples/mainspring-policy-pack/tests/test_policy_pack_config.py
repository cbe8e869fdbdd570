"""Loading the policy: the default, a file laid over it, and broken policies refusing to
load (the agent does not start)."""

from __future__ import annotations

import logging
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import importlib_metadata
import mainspring_policy_pack
import pytest

from mainspring import Agent, PluginLoadError, Settings
from mainspring.effects import Role
from mainspring.testing import FauxProvider, faux

PLUGIN = "mainspring-policy-pack"


def _agent(options: dict[str, Any] | None = None) -> Agent:
    return Agent(
        model="faux:test",
        provider=FauxProvider([]),
        plugins=[mainspring_policy_pack],
        autoload=False,
        settings=Settings(plugin_options={PLUGIN: options} if options is not None else {}),
    )


@pytest.fixture(autouse=True)
def _no_policy_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("MAINSPRING_POLICY_FILE", raising=False)
    yield


# -- the default -----------------------------------------------------------------------------


def test_without_a_file_the_documented_default_applies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MAINSPRING_WORKSPACE", raising=False)
    monkeypatch.chdir(tmp_path)

    policy = mainspring_policy_pack.policy_for(_agent())

    assert policy.source == "the default policy"
    assert policy.workspace == tmp_path.resolve()
    assert (policy.unknown_effect, policy.untrusted_flow, policy.confidential_flow) == (
        "ask",
        "ask",
        "ask",
    )
    assert policy.flow_effects == {"egress", "send", "write"}
    assert policy.flow_roles == {"principal", "url"}
    assert policy.unlabelled_results == "untrusted"
    assert policy.tools == {}
    default = tomllib.loads(mainspring_policy_pack.DEFAULT_POLICY_TOML)
    assert [rule.name for rule in policy.deny_rules] == [
        r["name"] for r in default["shell"]["deny"]
    ]
    assert [rule.name for rule in policy.ask_rules] == ["git-push-force", "git-push"]
    assert policy.path_ask_rules == ()
    assert [rule.name for rule in policy.redaction_rules] == [
        p["name"] for p in default["redaction"]["patterns"]
    ]
    assert policy.sandbox and policy.shell and policy.redact_results and policy.redact_context


def test_the_pack_registers_its_hooks_and_no_tools() -> None:
    agent = _agent()

    info = agent.plugins.info(PLUGIN)
    assert info is not None
    assert set(info.hooks) == {
        "register_tools",
        "before_tool_call",
        "label_tool_result",
        "after_tool_result",
        "filter_tool_update",
        "transform_context",
    }
    assert agent.state.tools == ()


async def test_the_file_can_come_from_the_environment(
    policy_run: Any, policy_file: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MAINSPRING_POLICY_FILE", str(policy_file("[shell]\nenabled = false\n")))

    run = await policy_run([faux.tool_call("bash", {"command": "sudo ls"}), faux.text("ok")])

    assert run.decisions()[0].decision == "allow"


def test_the_option_wins_over_the_environment(
    policy_file: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MAINSPRING_POLICY_FILE", "/nonexistent/policy.toml")
    good = policy_file("[shell]\nenabled = false\n")

    policy = mainspring_policy_pack.policy_for(_agent({"config": str(good)}))

    assert policy.source == f"the policy file {good}"
    assert policy.shell is False


def test_each_agent_has_its_own_policy(policy_file: Any) -> None:
    strict = _agent({"config": str(policy_file('[policy]\nuntrusted_flow = "block"\n'))})
    lax = _agent({"config": str(policy_file("[shell]\nenabled = false\n"))})

    assert mainspring_policy_pack.policy_for(strict).untrusted_flow == "block"
    assert mainspring_policy_pack.policy_for(lax).untrusted_flow == "ask"
    assert mainspring_policy_pack.policy_for(lax).shell is False


# -- switched off, the pack says so ---------------------------------------------------------

ALL_OFF = """
[sandbox]
enabled = false
[shell]
enabled = false
[redaction]
results = false
context = false
"""


def test_a_policy_that_turns_the_pack_off_is_logged_as_a_warning(
    policy_file: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="mainspring")
    path = policy_file(ALL_OFF)
    monkeypatch.setenv("MAINSPRING_POLICY_FILE", str(path))

    _agent({"workspace": str(path.parent)})

    (record,) = [r for r in caplog.records if r.name == "mainspring.policy_pack"]
    assert record.levelno == logging.WARNING
    message = record.getMessage()
    assert message.startswith(f"{PLUGIN}: the policy file {path} turns off ")
    for part in ("sandbox", "shell deny rules", "redaction in tool results", "context"):
        assert part in message


def test_dropped_default_rules_are_named_and_the_default_policy_is_quiet(
    policy_file: Any, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    caplog.set_level(logging.WARNING, logger="mainspring")
    path = policy_file('[shell]\ndisable = ["fork-bomb"]\n[redaction]\nuse_defaults = false\n')

    _agent({"workspace": str(tmp_path)})
    _agent({"config": str(path), "workspace": str(tmp_path)})

    (record,) = [r for r in caplog.records if r.name == "mainspring.policy_pack"]
    assert "the default shell deny rules fork-bomb" in record.getMessage()
    assert "the default redaction patterns private_key, private_key_body" in record.getMessage()


# -- broken policies stop the agent from starting ---------------------------------------------

BROKEN = [
    ("[sandbox\nenabled = true\n", "is not valid TOML"),
    ("[sandbox]\nenabeld = true\n", "sandbox.enabeld: Extra inputs are not permitted"),
    ("[shel]\nenabled = true\n", "shel: Extra inputs are not permitted"),
    ('[sandbox]\nenabled = "yes please"\n', "sandbox.enabled"),
    ('[shell]\ntools = "bash"\n', "shell.tools"),
    ('[[shell.deny]]\nname = "x"\npattern = "("\nreason = "r"\n', "deny rule 'x' has an invalid"),
    ('[[shell.deny]]\nname = "x"\npattern = "y"\n', "shell.deny.0.reason: Field required"),
    (
        '[[shell.deny]]\nname = "sudo-again"\npattern = "a"\nreason = "r"\n'
        '[[shell.deny]]\nname = "sudo-again"\npattern = "b"\nreason = "r"\n',
        "two entries named sudo-again",
    ),
    ('[shell]\ndisable = ["no-such-rule"]\n', "shell.disable names no default entry"),
    ('[[redaction.patterns]]\nname = "bad"\npattern = "[a-"\n', "redaction pattern 'bad'"),
    ('[[redaction.patterns]]\nname = "api_key"\npattern = "x"\n', "two entries named api_key"),
    ('[[redaction.patterns]]\nname = "has space"\npattern = "x"\n', "redaction.patterns.0.name"),
    ('[sandbox]\nworkspace = "does/not/exist"\n', "is not an existing directory"),
    (
        '[[shell.deny]]\nname = "x"\npattern = \'rm(?= -rf)\'\nreason = "r"\n',
        "deny rule 'x' has an invalid regular expression: a lookahead (?=...) is not supported",
    ),
    (
        "[[redaction.patterns]]\nname = \"x\"\npattern = '(a)\\1'\n",
        "redaction pattern 'x' has an invalid regular expression: a backreference",
    ),
    ('[[redaction.patterns]]\nname = "x"\npattern = "y"\ncheck = "maybe"\n', "check"),
    # ask rules
    (
        '[[shell.ask]]\nname = "x"\npattern = "("\nreason = "r"\n',
        "ask rule 'x' has an invalid regular expression",
    ),
    (
        '[[shell.ask]]\nname = "x"\npattern = \'(?<!no )push\'\nreason = "r"\n',
        "ask rule 'x' has an invalid regular expression: a negative lookbehind",
    ),
    ('[[shell.ask]]\nname = "x"\npattern = "push"\n', "shell.ask.0.reason: Field required"),
    (
        '[[shell.ask]]\nname = "x"\npatern = "push"\nreason = "r"\n',
        "shell.ask.0.patern: Extra inputs are not permitted",
    ),
    (
        '[[shell.ask]]\nname = "git-push"\npattern = "push"\nreason = "r"\n',
        "shell has two entries named git-push",
    ),
    (
        '[[shell.deny]]\nname = "same"\npattern = "a"\nreason = "r"\n'
        '[[shell.ask]]\nname = "same"\npattern = "b"\nreason = "r"\n',
        "shell has two entries named same",
    ),
    ('[shell]\ndisable = ["git-pull"]\n', "shell.disable names no default entry: git-pull"),
    (
        '[[sandbox.ask]]\nname = "x"\npattern = "a"\nreason = "r"\nwhen = "outside"\n',
        "sandbox.ask.0.when",
    ),
    (
        '[[sandbox.ask]]\nname = "x"\npattern = "a"\nreason = "r"\ntools = "write"\n',
        "sandbox.ask.0.tools",
    ),
    (
        '[[sandbox.ask]]\nname = "x"\npattern = \'(a)\\1\'\nreason = "r"\n',
        "path ask rule 'x' has an invalid regular expression: a backreference",
    ),
    (
        '[[sandbox.ask]]\nname = "x"\npattern = "a"\nreason = "r"\n'
        '[[sandbox.ask]]\nname = "x"\npattern = "b"\nreason = "r"\n',
        "sandbox.ask has two entries named x",
    ),
]


@pytest.mark.parametrize(("text", "message"), BROKEN, ids=[m for _, m in BROKEN])
def test_a_broken_policy_file_stops_the_agent(policy_file: Any, text: str, message: str) -> None:
    path = policy_file(text)

    with pytest.raises(PluginLoadError) as caught:
        _agent({"config": str(path)})

    assert caught.value.plugin == PLUGIN
    assert message in str(caught.value)
    assert str(path) in str(caught.value)  # the error names the file


def test_a_missing_policy_file_stops_the_agent(tmp_path: Path) -> None:
    with pytest.raises(PluginLoadError, match=r"cannot read the policy file .*missing\.toml"):
        _agent({"config": str(tmp_path / "missing.toml")})


def test_a_broken_file_named_by_the_environment_stops_the_agent(
    policy_file: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MAINSPRING_POLICY_FILE", str(policy_file("not toml at all = = =")))

    with pytest.raises(PluginLoadError, match="is not valid TOML"):
        _agent()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"confg": "x.toml"}, "confg: Extra inputs are not permitted"),
        ({"workspace": "/does/not/exist"}, "is not an existing directory"),
    ],
)
def test_bad_plugin_options_stop_the_agent(options: dict[str, Any], message: str) -> None:
    with pytest.raises(PluginLoadError, match=message):
        _agent(options)


def test_the_shipped_default_policy_is_valid_toml_with_every_section() -> None:
    default = tomllib.loads(mainspring_policy_pack.DEFAULT_POLICY_TOML)

    assert set(default) == {"policy", "sandbox", "shell", "redaction"}
    assert all(rule["reason"] for rule in default["shell"]["deny"])


# -- installed through the entry point ---------------------------------------------------------

try:
    INSTALLED = importlib_metadata.distribution(PLUGIN).version
except importlib_metadata.PackageNotFoundError:
    INSTALLED = None

needs_install = pytest.mark.skipif(
    INSTALLED is None,
    reason=f"{PLUGIN} is not installed; run: .venv/bin/pip install --no-deps -e examples/{PLUGIN}",
)


@pytest.fixture
def policy_autoload_only_the_pack(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MAINSPRING_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    monkeypatch.delenv("MAINSPRING_DISABLE_PLUGINS", raising=False)
    monkeypatch.setenv("MAINSPRING_PLUGINS", PLUGIN)


@needs_install
def test_installed_a_broken_policy_is_a_load_error_naming_the_distribution(
    policy_file: Any, policy_autoload_only_the_pack: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MAINSPRING_POLICY_FILE", str(policy_file("[sandbox]\nnope = 1\n")))

    with pytest.raises(PluginLoadError) as caught:
        Agent(model="faux:test", provider=FauxProvider([]))

    assert caught.value.plugin == PLUGIN
    assert "sandbox.nope" in str(caught.value)


@needs_install
async def test_installed_the_pack_blocks_under_its_entry_point_name(
    policy_world: Any, policy_autoload_only_the_pack: None
) -> None:
    from mainspring import tool
    from mainspring.testing import EventRecorder, check_event_grammar

    @tool(effects=("write",))
    def touch(path: Annotated[str, Role("path")]) -> str:
        """Pretend to create a file."""
        return "touched"

    provider = FauxProvider([faux.tool_call("touch", {"path": "../x"}), faux.text("ok")])
    agent = Agent(
        model="faux:test",
        provider=provider,
        tools=[touch],
        settings=Settings(plugin_options={PLUGIN: {"workspace": str(policy_world.workspace)}}),
    )
    recorder = EventRecorder()
    agent.subscribe(recorder)

    await agent.prompt("go")

    check_event_grammar(recorder.events)
    info = agent.plugins.info(PLUGIN)
    assert info is not None and (info.source, info.version) == ("entrypoint", INSTALLED)
    (decision,) = recorder.of_type("tool_decision")
    assert (decision.decision, decision.plugin) == ("block", PLUGIN)


def test_a_policy_that_allows_flows_says_so(
    policy_file: Any, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    caplog.set_level(logging.WARNING, logger="mainspring")
    config = policy_file('[policy]\nuntrusted_flow = "allow"\nunknown_effect = "allow"\n')

    _agent({"config": str(config), "workspace": str(tmp_path)})

    (record,) = [r for r in caplog.records if r.name == "mainspring.policy_pack"]
    assert "untrusted flow" in record.getMessage()
    assert "unknown effect" in record.getMessage()
