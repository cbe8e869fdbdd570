"""Plugin loading: built-ins, in-process plugins, naming, validation, disabling.

DESIGN §6, §8, §15: one plugin manager per agent; deterministic load order (built-ins,
installed plugins sorted by name, then ``plugins=`` in the order given); in-process
plugins are named by their ``name`` attribute, else their class or module name, made
unique with a suffix, and that name appears in ``agent.plugins.infos`` and in
``hook_error.plugin``; registration is validated (sync hooks need plain functions,
run-time hooks reject pluggy wrappers, unknown hooks are refused) and every failure is a
``PluginLoadError`` naming the plugin; non-essential built-ins can be disabled by name,
the essential ones cannot.
"""

from __future__ import annotations

import types
from typing import Any

import pytest

from mainspring import Agent, HookError, PluginLoadError, Settings, hookimpl, tool
from mainspring.contract import hookspecs
from mainspring.testing import EventRecorder, FauxProvider, check_event_grammar, faux

ESSENTIAL = {"convert_to_llm", "token_estimate", "fallback_compaction"}


def build(plugins: list[Any] = (), **kwargs: Any) -> Agent:  # type: ignore[assignment]
    kwargs.setdefault("provider", FauxProvider([faux.text("hi")] * 10))
    kwargs.setdefault("model", "faux:test")
    kwargs.setdefault("autoload", False)
    return Agent(plugins=list(plugins), **kwargs)


def names(agent: Agent, source: str | None = None) -> list[str]:
    return [i.name for i in agent.plugins.infos if source is None or i.source == source]


class Noop:
    """A plugin implementing one harmless hook."""

    @hookimpl
    def on_event(self):
        pass


# == load order and introspection =======================================================


def test_builtins_come_first_then_in_process_plugins_in_the_order_given() -> None:
    class Zeta(Noop):
        pass

    class Alpha(Noop):
        pass

    agent = build([Zeta(), Alpha()])
    infos = agent.plugins.infos

    sources = [i.source for i in infos]
    first_inprocess = sources.index("inprocess")
    assert set(sources[:first_inprocess]) == {"builtin"}
    assert names(agent, "inprocess") == ["Zeta", "Alpha"]  # given order, not sorted
    assert set(names(agent, "builtin")) >= ESSENTIAL
    for info in infos:
        assert info.essential == (info.name in ESSENTIAL)


def test_the_builtin_plugins_are_ordinary_plugins_with_hooks() -> None:
    agent = build()

    for info in agent.plugins.infos:
        assert info.source == "builtin"
        assert info.hooks, f"{info.name} implements no hook"
        assert set(info.hooks) <= hookspecs.SYNC_HOOKS | hookspecs.ASYNC_HOOKS
    assert "convert_to_llm" in agent.plugins.info("convert_to_llm").hooks
    assert "count_tokens" in agent.plugins.info("token_estimate").hooks
    assert "compact" in agent.plugins.info("fallback_compaction").hooks


def test_an_in_process_plugin_info_lists_its_hooks_and_object() -> None:
    class Gate:
        name = "gate"

        @hookimpl
        def before_tool_call(self):
            return None

        @hookimpl
        async def after_tool_result(self):
            return None

        def helper(self) -> None:  # not a hook
            pass

    plugin = Gate()
    info = build([plugin]).plugins.info("gate")

    assert info is not None
    assert info.source == "inprocess"
    assert info.plugin is plugin
    assert info.hooks == ("after_tool_result", "before_tool_call")
    assert info.distribution is None and info.version is None
    assert info.essential is False


def test_each_agent_has_its_own_plugin_manager() -> None:
    class Gate(Noop):
        pass

    with_gate, without = build([Gate()]), build()

    assert "Gate" in names(with_gate)
    assert "Gate" not in names(without)
    assert with_gate.plugins.pm is not without.plugins.pm


# == naming =============================================================================


def test_a_name_attribute_names_the_plugin() -> None:
    class Whatever(Noop):
        name = "acme-policy"

    assert names(build([Whatever()]), "inprocess") == ["acme-policy"]


def test_an_instance_is_named_by_its_class() -> None:
    class AuditTrail(Noop):
        pass

    assert names(build([AuditTrail()]), "inprocess") == ["AuditTrail"]


def test_a_class_is_named_by_itself() -> None:
    class StaticPlugin:
        @staticmethod
        @hookimpl
        def on_event():
            pass

    assert names(build([StaticPlugin]), "inprocess") == ["StaticPlugin"]


def test_a_module_is_named_by_its_module_name() -> None:
    module = types.ModuleType("acme_mainspring_plugin")

    @hookimpl
    def on_event() -> None:
        pass

    module.on_event = on_event  # type: ignore[attr-defined]

    agent = build([module])

    assert names(agent, "inprocess") == ["acme_mainspring_plugin"]
    assert agent.plugins.info("acme_mainspring_plugin").hooks == ("on_event",)


def test_a_name_that_is_not_a_string_falls_back_to_the_class_name() -> None:
    class Odd(Noop):
        def name(self) -> str:  # a method, not a name
            return "nope"

    assert names(build([Odd()]), "inprocess") == ["Odd"]


def test_names_are_made_unique_with_a_suffix() -> None:
    class Gate(Noop):
        pass

    class Named(Noop):
        name = "Gate"

    agent = build([Gate(), Gate(), Named(), Gate()])

    assert names(agent, "inprocess") == ["Gate", "Gate-2", "Gate-3", "Gate-4"]


def test_an_in_process_plugin_named_like_a_builtin_gets_a_suffix() -> None:
    class Mine(Noop):
        name = "max_turns"

    agent = build([Mine()])

    assert "max_turns" in names(agent, "builtin")
    assert names(agent, "inprocess") == ["max_turns-2"]


async def test_the_unique_name_is_what_hook_error_reports() -> None:
    class Flaky:
        @hookimpl
        def transform_context(self):
            raise RuntimeError("flaky")

    provider = FauxProvider([faux.text("hi")])
    agent = build([Flaky(), Flaky()], provider=provider)
    recorder = EventRecorder()
    agent.subscribe(recorder)

    await agent.prompt("go")

    check_event_grammar(recorder.events)
    assert sorted(e.plugin for e in recorder.of_type("hook_error")) == ["Flaky", "Flaky-2"]


# == registration validation ============================================================


@pytest.mark.parametrize("hook", sorted(hookspecs.SYNC_HOOKS))
def test_an_async_implementation_of_a_sync_hook_is_refused(hook: str) -> None:
    async def implementation() -> None:
        return None

    plugin = types.SimpleNamespace(name="async-sync", **{hook: hookimpl(implementation)})
    # SimpleNamespace attributes are found by pluggy like a module's
    implementation.__name__ = hook

    with pytest.raises(PluginLoadError) as caught:
        build([plugin])

    assert caught.value.plugin == "async-sync"
    assert "async-sync" in str(caught.value)
    assert hook in str(caught.value)


def test_an_async_register_tools_method_is_refused_naming_the_plugin() -> None:
    class AsyncTools:
        @hookimpl
        async def register_tools(self):
            return []

    with pytest.raises(PluginLoadError) as caught:
        build([AsyncTools()])

    assert caught.value.plugin == "AsyncTools"
    assert "AsyncTools" in str(caught.value) and "register_tools" in str(caught.value)


@pytest.mark.parametrize("hook", sorted(hookspecs.ASYNC_HOOKS | hookspecs.SYNC_HOOKS))
@pytest.mark.parametrize("style", ["hookwrapper", "wrapper"])
def test_a_wrapper_on_any_hook_is_refused(hook: str, style: str) -> None:
    def implementation():  # type: ignore[no-untyped-def]
        yield

    implementation.__name__ = hook
    marked = hookimpl(**{style: True})(implementation)
    plugin = types.SimpleNamespace(name="wrapping-plugin", **{hook: marked})

    with pytest.raises(PluginLoadError) as caught:
        build([plugin])

    assert caught.value.plugin == "wrapping-plugin"
    message = str(caught.value)
    assert "wrapping-plugin" in message
    assert hook in message
    assert "wrappers are not supported" in message


def test_a_hookwrapper_method_on_before_tool_call_is_refused() -> None:
    class Wrapping:
        name = "timing"

        @hookimpl(wrapper=True)
        def before_tool_call(self):
            result = yield
            return result

    with pytest.raises(PluginLoadError) as caught:
        build([Wrapping()])

    assert caught.value.plugin == "timing"
    assert "before_tool_call" in str(caught.value)


def test_an_unknown_hook_name_is_refused_naming_the_plugin_and_the_hook() -> None:
    class Typo:
        name = "typo-plugin"

        @hookimpl
        def before_tool_cal(self, call):  # sic
            return None

    with pytest.raises(PluginLoadError) as caught:
        build([Typo()])

    assert caught.value.plugin == "typo-plugin"
    message = str(caught.value)
    assert "typo-plugin" in message
    assert "before_tool_cal" in message


def test_an_implementation_asking_for_an_unknown_argument_is_refused() -> None:
    class WrongArgs:
        name = "wrong-args"

        @hookimpl
        def before_tool_call(self, call, arguments):  # the spec says "args"
            return None

    with pytest.raises(PluginLoadError) as caught:
        build([WrongArgs()])

    assert caught.value.plugin == "wrong-args"
    assert "wrong-args" in str(caught.value)


def test_registering_the_same_object_twice_is_refused() -> None:
    plugin = Noop()

    with pytest.raises(PluginLoadError):
        build([plugin, plugin])


def test_a_plugin_load_error_is_raised_before_any_run() -> None:
    class Typo:
        @hookimpl
        def on_evnt(self):
            pass

    provider = FauxProvider([faux.text("never")])
    with pytest.raises(PluginLoadError):
        build([Typo()], provider=provider)

    assert provider.requests == []


def test_hook_error_is_public_and_names_hook_and_plugin() -> None:
    error = HookError("before_tool_call", "acme", ValueError("bad"))

    assert (error.hook, error.plugin) == ("before_tool_call", "acme")
    assert "acme" in str(error) and "before_tool_call" in str(error) and "bad" in str(error)


# == disabling built-ins ================================================================


@tool
def echo(text: str) -> str:
    """Echo the text back."""
    return text


async def test_max_turns_can_be_disabled_by_name() -> None:
    steps = [faux.tool_call("echo", {"text": "x"})] * 3 + [faux.text("done")]
    provider = FauxProvider(steps)
    agent = build(
        provider=provider,
        tools=[echo],
        settings=Settings(max_turns=1),
        disable_plugins=["max_turns"],
    )
    recorder = EventRecorder()
    agent.subscribe(recorder)

    await agent.prompt("go")

    check_event_grammar(recorder.events)
    assert "max_turns" not in names(agent)
    assert recorder.of_type("agent_end")[0].reason == "stop"
    assert len(provider.requests) == 4


@pytest.mark.parametrize("spelling", ["max-turns", "Max_Turns", "max.turns"])
def test_disabling_normalises_the_name(spelling: str) -> None:
    assert "max_turns" not in names(build(disable_plugins=[spelling]))


def test_the_environment_denylist_also_disables_builtins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAINSPRING_DISABLE_PLUGINS", "event_log,max_turns")

    loaded = names(build())

    assert "max_turns" not in loaded
    assert "event_log" not in loaded
    assert set(loaded) >= ESSENTIAL


def test_the_environment_denylist_tolerates_spaces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAINSPRING_DISABLE_PLUGINS", " event_log , max_turns ")

    loaded = names(build())

    assert "max_turns" not in loaded
    assert "event_log" not in loaded
    assert set(loaded) >= ESSENTIAL


def test_every_non_essential_builtin_can_be_disabled() -> None:
    optional = [n for n in names(build()) if n not in ESSENTIAL]
    assert optional, "expected some non-essential built-ins"

    agent = build(disable_plugins=optional)

    assert set(names(agent)) == ESSENTIAL


def test_the_essential_builtins_cannot_be_disabled() -> None:
    agent = build(disable_plugins=sorted(ESSENTIAL))

    assert set(names(agent)) >= ESSENTIAL
    for name in ESSENTIAL:
        assert agent.plugins.info(name).essential


async def test_the_default_converter_still_works_when_asked_to_disable_it() -> None:
    from pydantic import BaseModel, ConfigDict

    class Note(BaseModel):
        model_config = ConfigDict(frozen=True)
        role: str = "note"
        text: str = "private"

    provider = FauxProvider([faux.text("hi")])
    agent = build(provider=provider, messages=[Note()], disable_plugins=["convert_to_llm"])

    await agent.prompt("go")

    assert [m.role for m in provider.requests[0].messages] == ["user"]


def test_the_allowlist_does_not_apply_to_builtins_or_in_process_plugins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MAINSPRING_PLUGINS", "")
    baseline = names(build(), "builtin")

    agent = build([Noop()], autoload=True)

    assert names(agent, "builtin") == baseline
    assert names(agent, "inprocess") == ["Noop"]
    assert names(agent, "entrypoint") == []


def test_a_plugin_is_named_the_same_in_process_and_installed() -> None:
    import types

    from mainspring import Agent
    from mainspring.testing import FauxProvider

    named = types.ModuleType("acme_pack_module")
    named.PLUGIN_NAME = "acme-pack"  # type: ignore[attr-defined]
    plain = types.ModuleType("plain_module")
    agent = Agent(
        model="faux:test", provider=FauxProvider([]), autoload=False, plugins=[named, plain]
    )
    names = [info.name for info in agent.plugins.infos if info.source == "inprocess"]
    assert names == ["acme-pack", "plain_module"]
