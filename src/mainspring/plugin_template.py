"""A new plugin package, ready to install and test: ``mainspring new-plugin NAME``.

:func:`write_plugin` writes a distribution named ``NAME`` whose module (``NAME`` with
``-`` as ``_``) holds one tool and one permission gate, registered under the
``mainspring`` entry-point group; tests that use :mod:`mainspring.testing` (the pytest
plugin's fixtures, ``scripted_run`` and the ``check_entry_point`` smoke test); a README;
and a ``pyproject.toml`` with a version, a build system (hatchling) and pytest settings
(pytest-asyncio in ``auto`` mode). ``pip install -e "NAME[test]"`` then ``pytest NAME``
passes as written.

A name that would shadow something is refused (:func:`name_taken`): an installed
distribution (compared as packaging normalises names: case, and runs of ``-``, ``_``
and ``.``, do not matter), one of mainspring's example packs (:data:`EXAMPLE_PACKS`,
installed or not), or a module name already importable (the standard library's
included). An installed plugin of the same name as a pack would shadow the pack, its
entry point and its options.

The generated gate identifies the calls it decides by the tool's *name* (what the model
calls, whoever contributed the tool), never by object identity: a tool of the same name
registered another way, or wrapped, is still gated.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
import sys
from pathlib import Path

from . import __version__

__all__ = ["EXAMPLE_PACKS", "module_name", "name_taken", "write_plugin"]

EXAMPLE_PACKS = (
    "mainspring-coding-tools",
    "mainspring-hello-plugin",
    "mainspring-policy-pack",
    "mainspring-summary-compaction",
)
"""The example packs' distribution names, reserved whether installed or not."""

_NAME = re.compile(r"[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*")

_PYPROJECT = """\
[build-system]
requires = ["hatchling>=1.18"]
build-backend = "hatchling.build"

[project]
name = "{name}"
version = "0.1.0"
description = "A mainspring plugin: the shout tool and a gate that limits its input."
readme = "README.md"
requires-python = ">=3.11"
dependencies = ["mainspring>={version}"]

[project.optional-dependencies]
test = ["pytest>=8", "pytest-asyncio>=0.24"]

# what makes it a plugin: agents load every module registered in this group
[project.entry-points.mainspring]
{name} = "{module}"

# its capability manifest, the one place it is declared: one entry per capability, read
# without importing it (mainspring's docs/capabilities.md); reinstall after editing it
[project.entry-points."mainspring.capabilities"]
"{name}.tools" = "{module}"
"{name}.gate" = "{module}"

[tool.hatch.build.targets.wheel]
packages = ["src/{module}"]

[tool.pytest.ini_options]
testpaths = ["tests"]
asyncio_mode = "auto"
asyncio_default_fixture_loop_scope = "function"
filterwarnings = ["error"]
"""

_MODULE = '''\
"""{name}: a mainspring plugin with one tool and one permission gate.

- ``shout(text)``: a tool that returns ``text`` in capitals.
- a ``before_tool_call`` gate that refuses to shout more than ``max_length`` characters
  (the plugin option ``max_length``, default {default_max}).

Configure it through the agent's settings, or the config file's
``[plugin_options."{name}"]`` table::

    Settings(plugin_options={{"{name}": {{"max_length": 20}}}})
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import mainspring
from mainspring import Block, hookimpl

PLUGIN_NAME = "{name}"
"""The distribution and entry-point name; also the key of this plugin's options."""

DEFAULT_MAX_LENGTH = {default_max}


@mainspring.tool(effects="none")
def shout(text: str) -> str:
    """Say something loudly.

    Args:
        text: What to say.
    """
    return text.upper()


def max_length(agent: mainspring.Agent) -> int:
    """The longest text this agent's gate lets ``shout`` take (the ``max_length`` option)."""
    options = agent.settings.plugin_options.get(PLUGIN_NAME, {{}})
    return int(options.get("max_length", DEFAULT_MAX_LENGTH))


@hookimpl
def register_tools() -> Sequence[mainspring.Tool]:
    """Contribute the tools (called once per agent)."""
    return [shout]


GATED_TOOLS = frozenset({{shout.name}})
"""The tools this gate decides, by name: whoever contributed a tool of that name (this
plugin, another one, an MCP server), and however the kernel wraps it, it is gated. Never
compare tool objects (``tool is shout``): another object of the same name would pass."""


def gated(tool: mainspring.Tool) -> bool:
    """Whether this gate decides calls of ``tool``.

    Identified by name today. When tools declare their effects, decide by effect here as
    well (a tool that writes, or reaches the network, say), so that a tool of another name
    with the same effect is gated too.
    """
    return tool.name in GATED_TOOLS


@hookimpl
def before_tool_call(tool: mainspring.Tool, args: Any, agent: mainspring.AgentView) -> Block | None:
    """Refuse a ``shout`` whose text is too long; no opinion on any other call.

    ``args`` are the validated arguments that will run, as a read-only
    ``mainspring.ToolArgs`` (the same for every tool): ``args.get("text")`` is the text
    (read defensively: a tool of the same name from elsewhere may send an odd one).
    """
    if not gated(tool):
        return None
    text = args.get("text")
    if not isinstance(text, str):
        return Block(f"{{PLUGIN_NAME}} shouts text only.")
    limit = max_length(agent)
    if len(text) > limit:
        return Block(f"{{PLUGIN_NAME}} will not shout more than {{limit}} characters.")
    return None
'''

_TESTS = '''\
"""Tests of {name}: in-process (nothing to install) except the entry-point smoke test.

The fixtures ``agent``, ``faux_provider`` and ``recorder`` come from mainspring's pytest
plugin; markers choose the agent's plugins, tools, settings and model.
"""

from __future__ import annotations

import pytest
from mainspring import Settings
from mainspring.testing import check_entry_point, faux, scripted_run

import {module}

pytestmark = pytest.mark.mainspring_plugins({module})


async def test_shout_shouts(agent, faux_provider, recorder) -> None:
    faux_provider.extend([faux.tool_call("shout", {{"text": "hello"}}), faux.text("done")])

    await agent.prompt("shout hello")

    [end] = recorder.of_type("tool_execution_end")
    assert end.result.text == "HELLO"
    assert not end.is_error


async def test_the_gate_refuses_long_text(agent, faux_provider, recorder) -> None:
    text = "a" * ({module}.DEFAULT_MAX_LENGTH + 1)
    faux_provider.extend([faux.tool_call("shout", {{"text": text}}), faux.text("ok")])

    await agent.prompt("shout")

    [decision] = recorder.of_type("tool_decision")
    assert decision.decision == "block"
    [end] = recorder.of_type("tool_execution_end")
    assert end.is_error and "will not shout" in end.result.text


@pytest.mark.mainspring_settings(Settings(plugin_options={{"{name}": {{"max_length": 3}}}}))
async def test_the_limit_is_an_option(agent, faux_provider, recorder) -> None:
    faux_provider.extend([faux.tool_call("shout", {{"text": "four"}}), faux.text("ok")])

    await agent.prompt("shout")

    assert recorder.of_type("tool_decision")[0].decision == "block"


async def test_in_one_call_with_scripted_run() -> None:
    agent, recorder, _ = await scripted_run(
        [faux.tool_call("shout", {{"text": "hi"}}), faux.text("done")], plugins=[{module}]
    )
    assert recorder.of_type("tool_execution_end")[0].result.text == "HI"
    assert agent.state.messages[-1].text == "done"


def test_the_entry_point_loads() -> None:
    """Installed (pip install -e .), the plugin loads as an agent's autoload would."""
    assert check_entry_point({module}.PLUGIN_NAME) == {{"{name}": {module}}}
'''

_README = """\
# {name}

A [mainspring](https://pypi.org/project/mainspring/) plugin: the `shout` tool and a
permission gate that refuses to shout more than `max_length` characters.

```bash
pip install -e ".[test]"   # install it (and pytest) into your environment
pytest                     # run its tests
mainspring plugins         # {name} is listed with its hooks and tools
```

Configure it in the config file (`mainspring config` shows where that is):

```toml
[plugin_options."{name}"]
max_length = 20
```

Start from `src/{module}/__init__.py`: each function decorated with `@hookimpl` is named
after the hook it implements. Every hook is described in mainspring's hook reference
(`docs/hooks.md`); the testing kit in `docs/testing.md`.
"""


def module_name(name: str) -> str:
    """The import name of the distribution ``name`` (``-`` becomes ``_``)."""
    return name.replace("-", "_")


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def name_taken(name: str) -> str | None:
    """Why the plugin name ``name`` would shadow something (see the module), or ``None``."""
    wanted = _normalized(name)
    if wanted in {_normalized(pack) for pack in EXAMPLE_PACKS}:
        return "it is the name of one of mainspring's example packs"
    for distribution in importlib.metadata.distributions():
        installed = distribution.metadata["Name"] or ""
        if _normalized(installed) == wanted:
            return f"a distribution of that name is installed ({installed} {distribution.version})"
    module = module_name(name)
    try:
        found = module in sys.stdlib_module_names or importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = True
    if found:
        return f"a module named {module!r} can already be imported"
    return None


def write_plugin(name: str, directory: Path | None = None) -> Path:
    """Write the package ``name`` into ``directory`` (default ``./name``); return it.

    ``name`` is a distribution name of lowercase letters, digits, ``-`` and ``_``,
    starting with a letter, that shadows nothing (:func:`name_taken`). Raises
    ``ValueError`` for another name, or when ``directory`` exists and is not empty
    (nothing is overwritten).
    """
    if not _NAME.fullmatch(name):
        raise ValueError(
            f"{name!r} is not a plugin name: use lowercase letters, digits and '-', "
            "starting with a letter (e.g. mainspring-weather)"
        )
    taken = name_taken(name)
    if taken is not None:
        raise ValueError(f"{name!r} cannot be a new plugin's name: {taken}; choose another")
    target = Path(directory) if directory is not None else Path(name)
    if target.exists() and any(target.iterdir()):
        raise ValueError(f"{target} exists and is not empty; choose another directory")
    module = module_name(name)
    fields = {"name": name, "module": module, "version": __version__, "default_max": 200}
    files = {
        "pyproject.toml": _PYPROJECT,
        "README.md": _README,
        f"src/{module}/__init__.py": _MODULE,
        f"src/{module}/py.typed": "",
        f"tests/test_{module}.py": _TESTS,
    }
    for relative, template in files.items():
        path = target / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(template.format(**fields), encoding="utf-8")
    return target
