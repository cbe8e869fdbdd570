"""``mainspring mcp``, ``mainspring tools`` and ``mainspring run --mcp`` with the test server."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest
from mcp_helpers import SERVER

from mainspring.cli import main


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    config = tmp_path / "config.toml"
    config.write_text(
        "[mcp.servers.conf]\n"
        f"command = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(SERVER)}]\n"
        'tool_prefix = "c"\n'
        'include = ["echo", "pid"]\n'
    )
    monkeypatch.setenv("MAINSPRING_CONFIG", str(config))
    monkeypatch.setenv("MAINSPRING_DISABLE_PLUGIN_AUTOLOAD", "1")
    return config


def test_mcp_lists_servers_state_and_tools(capsys: pytest.CaptureFixture[str]) -> None:
    command = f"{shlex.quote(sys.executable)} {shlex.quote(SERVER)}"
    assert main(["mcp", "--json", "--mcp", f"extra={command}"]) == 0
    rows = {row["server"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["conf"]["tools"] == ["c_echo", "c_pid"]
    assert rows["conf"]["transport"] == "stdio"
    assert rows["conf"]["state"] in ("running", "stopped")  # lazy once its tools are known
    assert "echo" in rows["extra"]["tools"] and "slow" in rows["extra"]["tools"]
    assert main(["mcp"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("conf  (stdio: ") and "tools: c_echo, c_pid" in text


def test_tools_names_each_tools_server(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tools", "--json"]) == 0
    rows = {row["tool"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["c_echo"]["server"] == "conf" and rows["c_echo"]["plugin"] == "mcp"
    assert main(["tools"]) == 0
    assert "c_echo  [mcp, server conf]  Repeat text." in capsys.readouterr().out


def test_a_malformed_mcp_option_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tools", "--mcp", "no-command"]) == 2
    assert "--mcp takes NAME=COMMAND" in capsys.readouterr().err


def test_mcp_takes_an_inline_table_and_a_desktop_json_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    desktop = tmp_path / "claude_desktop_config.json"
    desktop.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "desk": {"command": sys.executable, "args": [SERVER], "env": {"A": "1"}},
                    "off": {"command": "never-started", "disabled": True},
                }
            }
        )
    )
    monkeypatch.setenv("MAINSPRING_TEST_PREFIX", "inl")
    table = (
        f"inline={{command={json.dumps(sys.executable)}, args=[{json.dumps(SERVER)}], "
        'tool_prefix="inl", include=["pid"], env={B="${MAINSPRING_TEST_PREFIX}"}}'
    )
    assert main(["mcp", "--json", "--mcp", str(desktop), "--mcp", table]) == 0
    rows = {row["server"]: row for row in json.loads(capsys.readouterr().out)}
    assert set(rows) == {"conf", "desk", "inline"}
    assert "echo" in rows["desk"]["tools"]
    assert rows["inline"]["tools"] == ["inl_pid"]


def test_the_config_file_names_desktop_json_files(
    _isolated: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    desktop = tmp_path / "servers.json"
    desktop.write_text(
        json.dumps({"mcpServers": {"desk": {"command": sys.executable, "args": [SERVER]}}})
    )
    _isolated.write_text(f"[mcp]\nserver_files = [{json.dumps(str(desktop))}]\n")
    assert main(["mcp", "--json"]) == 0
    rows = {row["server"]: row for row in json.loads(capsys.readouterr().out)}
    assert set(rows) == {"desk"} and "echo" in rows["desk"]["tools"]


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("x={url=", "--mcp x: not an inline TOML table"),
        ("x={url=1}", "--mcp x: url: Input should be a valid string"),
        ("x={command='a', nope=1}", "--mcp x: nope: Extra inputs are not permitted"),
    ],
)
def test_a_bad_inline_table_is_a_usage_error(
    option: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["tools", "--mcp", option]) == 2
    assert message in capsys.readouterr().err


def test_a_desktop_file_with_sse_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    desktop = tmp_path / "sse.json"
    desktop.write_text(json.dumps({"mcpServers": {"s": {"type": "sse", "url": "http://x"}}}))
    assert main(["tools", "--mcp", str(desktop)]) == 2
    assert f"{desktop}: MCP server \"s\": the 'sse' transport is not supported" in (
        capsys.readouterr().err
    )
