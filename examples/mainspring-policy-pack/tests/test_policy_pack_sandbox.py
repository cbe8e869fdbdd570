"""The workspace sandbox: every escape it names is refused, normal paths are allowed.

Each case is a full agent run: the model calls a tool with a path argument, and the test
checks the ``tool_decision`` event (decision, plugin, reason), the result the model got,
and whether the tool ran.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mainspring.testing import faux

PLUGIN = "mainspring-policy-pack"

# (tool, arguments; "{ws}"/"{out}" stand for the workspace and the outside directory,
#  the reason's expected fragment)
REFUSED = [
    ("touch", {"path": "../outside/x"}, "climbs out of the workspace"),
    ("touch", {"path": "sub/../../outside/x"}, "climbs out of the workspace"),
    ("touch", {"path": ".."}, "climbs out of the workspace"),
    ("touch", {"path": "/etc/passwd"}, "is an absolute path outside the workspace"),
    ("touch", {"path": "{out}/secret.txt"}, "is an absolute path outside the workspace"),
    ("touch", {"path": "{ws}/../outside/x"}, "is an absolute path outside the workspace"),
    ("touch", {"path": "out_file"}, "resolves through a symlink to"),
    ("touch", {"path": "out_dir/secret.txt"}, "resolves through a symlink to"),
    ("touch", {"path": "out_dir/new/deeper.txt"}, "resolves through a symlink to"),
    ("touch", {"path": "~"}, "is a home-directory (~) path"),
    ("touch", {"path": "~/.ssh/id_rsa"}, "is a home-directory (~) path"),
    ("touch", {"path": "~root/.bashrc"}, "is a home-directory (~) path"),
    ("copy", {"file": "a.txt", "file_path": "../outside/copy.txt"}, "'file_path'"),
    ("copy", {"file": "/etc/shadow", "file_path": "b.txt"}, "'file'"),
    ("list_dir", {"directory": "../"}, "'directory'"),
    ("bash", {"command": "ls", "cwd": "/"}, "'cwd'"),
    ("bash", {"command": "ls", "cwd": "~"}, "'cwd'"),
]

ALLOWED = [
    ("touch", {"path": "a.txt"}),
    ("touch", {"path": "sub/new.txt"}),
    ("touch", {"path": "new/dirs/file.txt"}),
    ("touch", {"path": "{ws}/a.txt"}),
    ("touch", {"path": "{ws}"}),
    ("touch", {"path": "."}),
    ("touch", {"path": "sub/../a.txt"}),
    ("touch", {"path": "in_link"}),
    ("touch", {"path": "file~backup"}),
    ("copy", {"file": "a.txt", "file_path": "sub/a.txt"}),
    ("list_dir", {}),
    ("bash", {"command": "ls", "cwd": "sub"}),
    ("bash", {"command": "ls"}),
]


def _fill(args: dict[str, Any], workspace: Path, outside: Path) -> dict[str, Any]:
    return {
        key: value.format(ws=workspace, out=outside) if isinstance(value, str) else value
        for key, value in args.items()
    }


def _id(case: tuple[Any, ...]) -> str:
    return f"{case[0]}-{'-'.join(str(v) for v in case[1].values()) or 'defaults'}"


@pytest.mark.parametrize(("tool", "args", "reason"), REFUSED, ids=[_id(c) for c in REFUSED])
async def test_the_pack_refuses_every_escape(
    policy_world: Any, policy_run: Any, tool: str, args: dict[str, Any], reason: str
) -> None:
    args = _fill(args, policy_world.workspace, policy_world.outside)

    run = await policy_run([faux.tool_call(tool, args, id="c1"), faux.text("ok")])

    (decision,) = run.decisions()
    assert (decision.tool_call_id, decision.tool_name) == ("c1", tool)
    assert (decision.decision, decision.plugin) == ("block", PLUGIN)
    assert decision.reason.startswith("sandbox: path argument ")
    assert reason in decision.reason
    (result,) = run.results()
    assert result.is_error
    assert result.text == f'Tool call "{tool}" was blocked by {PLUGIN}: {decision.reason}'
    assert run.executed == []


@pytest.mark.parametrize(("tool", "args"), ALLOWED, ids=[_id(c) for c in ALLOWED])
async def test_the_pack_allows_normal_paths(
    policy_world: Any, policy_run: Any, tool: str, args: dict[str, Any]
) -> None:
    args = _fill(args, policy_world.workspace, policy_world.outside)

    run = await policy_run([faux.tool_call(tool, args, id="c1"), faux.text("ok")])

    (decision,) = run.decisions()
    assert (decision.decision, decision.plugin, decision.reason) == ("allow", None, None)
    (result,) = run.results()
    assert not result.is_error
    assert [name for name, _ in run.executed] == [tool]


async def test_one_turn_gets_one_decision_per_call(policy_run: Any) -> None:
    calls = [
        faux.tool_call("touch", {"path": "a.txt"}, id="ok1"),
        faux.tool_call("touch", {"path": "../x"}, id="bad"),
        faux.tool_call("touch", {"path": "sub/b.txt"}, id="ok2"),
    ]

    run = await policy_run([calls, faux.text("ok")])

    summary = [(d.tool_call_id, d.decision, d.plugin) for d in run.decisions()]
    assert summary == [("ok1", "allow", None), ("bad", "block", PLUGIN), ("ok2", "allow", None)]
    assert [args["path"] for _, args in run.executed] == ["a.txt", "sub/b.txt"]
    assert [r.tool_call_id for r in run.results()] == ["ok1", "bad", "ok2"]


async def test_roles_of_a_tool_the_pack_does_not_own_come_from_the_config(
    policy_run: Any, policy_file: Any
) -> None:
    config = policy_file('[policy.tools.deploy]\nargs = {targets = "paths"}\n')
    calls = [
        faux.tool_call("deploy", {"targets": ["sub/a", "../../etc"]}, id="list"),
        faux.tool_call("deploy", {"targets": ["sub/a", "sub/b"]}, id="inside"),
    ]

    undeclared = await policy_run([list(calls), faux.text("ok")])
    run = await policy_run([list(calls), faux.text("ok")], config=config)

    # without the roles, nothing says `targets` holds paths: both run
    assert [d.decision for d in undeclared.decisions()] == ["allow", "allow"]
    blocked, allowed = run.decisions()
    assert (blocked.decision, blocked.plugin) == ("block", PLUGIN)
    assert "path argument 'targets' ('../../etc') climbs out" in blocked.reason
    assert allowed.decision == "allow"


async def test_the_sandbox_can_be_turned_off(policy_run: Any, policy_file: Any) -> None:
    config = policy_file("[sandbox]\nenabled = false\n")

    run = await policy_run([faux.tool_call("touch", {"path": "/etc/x"}), faux.text("ok")], config)

    (decision,) = run.decisions()
    assert decision.decision == "allow"


async def test_the_policy_file_can_pin_the_workspace(
    policy_world: Any, policy_run: Any, tmp_path: Path
) -> None:
    policy_dir = tmp_path / "policies"
    policy_dir.mkdir()
    config = policy_dir / "policy.toml"
    config.write_text('[sandbox]\nworkspace = "../outside"\n')  # relative to the file

    run = await policy_run(
        [
            [
                faux.tool_call("touch", {"path": "secret.txt"}),
                faux.tool_call("touch", {"path": str(policy_world.workspace / "a.txt")}),
            ],
            faux.text("ok"),
        ],
        config=config,
    )

    inside, elsewhere = run.decisions()
    assert inside.decision == "allow"
    assert elsewhere.decision == "block"
    assert f"outside the workspace {policy_world.outside}" in elsewhere.reason


async def test_the_workspace_can_come_from_the_environment(
    policy_world: Any, policy_run: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MAINSPRING_WORKSPACE", str(policy_world.outside))

    run = await policy_run(
        [faux.tool_call("touch", {"path": "secret.txt"}), faux.text("ok")], workspace=None
    )

    (decision,) = run.decisions()
    assert decision.decision == "allow"
    assert run.agent is not None
    import mainspring_policy_pack

    assert mainspring_policy_pack.policy_for(run.agent).workspace == policy_world.outside
