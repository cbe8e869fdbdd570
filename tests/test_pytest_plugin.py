"""The testing kit's pytest plugin, as a plugin author's test session sees it.

The session in ``tests/fixtures/pytest_plugin`` (``check_*.py``, which this suite does not
collect) enables nothing: the fixtures come from the
``pytest11`` entry point. It runs in a pytest process of its own so that the entry point,
not this session's configuration, is what provides them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mainspring.testing import check_entry_point

SESSION = Path(__file__).parent / "fixtures" / "pytest_plugin"


def test_the_fixtures_work_in_a_session_that_enables_nothing(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n"
        "filterwarnings = error\n"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(SESSION),
            "-c",
            str(tmp_path / "pytest.ini"),
            "--rootdir",
            str(SESSION),
            "-q",
            "-o",
            "python_files=check_*.py",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:cov",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "9 passed" in done.stdout, done.stdout


def test_this_session_has_the_plugin_too(pytestconfig: pytest.Config) -> None:
    assert pytestconfig.pluginmanager.has_plugin("mainspring.testing.pytest_plugin")


# -- check_entry_point --------------------------------------------------------------------


def fake_distribution(root: Path, name: str, entry_points: str, module: str = "") -> None:
    """An installed distribution ``name`` on ``root`` (a dist-info directory, as pip makes)."""
    info = root / f"{name.replace('-', '_')}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(entry_points)
    if module:
        (root / f"{name.replace('-', '_')}.py").write_text(module)


def test_an_installed_example_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("mainspring_hello_plugin")
    loaded = check_entry_point("mainspring-hello-plugin")
    assert list(loaded) == ["mainspring-hello-plugin"]


def test_a_distribution_that_is_not_installed_fails() -> None:
    with pytest.raises(AssertionError, match="not installed"):
        check_entry_point("no-such-mainspring-plugin")


def test_a_distribution_without_an_entry_point_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_distribution(tmp_path, "nothing-declared", "[console_scripts]\nx = os:getcwd\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(AssertionError, match=r"no entry point in the 'mainspring' group"):
        check_entry_point("nothing-declared")


def test_an_entry_point_that_does_not_import_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_distribution(
        tmp_path,
        "broken-import",
        "[mainspring]\nbroken-import = broken_import\n",
        "raise RuntimeError('missing dependency')\n",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(AssertionError, match="failed to load: RuntimeError: missing dependency"):
        check_entry_point("broken-import")


def test_a_plugin_without_hooks_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_distribution(
        tmp_path,
        "no-hooks",
        "[mainspring]\nno-hooks = no_hooks\n",
        "def register_tools():\n    return []\n",  # the decorator is missing
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(AssertionError, match="implements no hook"):
        check_entry_point("no-hooks")


def test_a_plugin_an_agent_refuses_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_distribution(
        tmp_path,
        "bad-hook",
        "[mainspring]\nbad-hook = bad_hook\n",
        "from mainspring import hookimpl\n\n@hookimpl\ndef on_event(event, nonsense):\n"
        "    return None\n",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(AssertionError, match="autoload refuses bad-hook"):
        check_entry_point("bad-hook")
