"""The docs stay true: the hook reference is generated from the hookspecs."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_hook_reference_is_up_to_date() -> None:
    spec = importlib.util.spec_from_file_location(
        "generate_hook_reference", ROOT / "docs" / "generate_hook_reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    committed = (ROOT / "docs" / "hooks.md").read_text(encoding="utf-8")
    assert committed == module.render(), (
        "docs/hooks.md is stale: run `python docs/generate_hook_reference.py`"
    )


def test_every_docs_page_is_linked_from_the_index() -> None:
    index = (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    for page in sorted((ROOT / "docs").glob("*.md")):
        if page.name != "README.md":
            assert f"({page.name})" in index, f"{page.name} is not linked from docs/README.md"


def test_the_hook_reference_shows_no_restructuredtext_markup() -> None:
    reference = (ROOT / "docs" / "hooks.md").read_text(encoding="utf-8")
    roles = re.findall(r":[a-z]+:`[^`]*`", reference)
    assert roles == [], f"Sphinx roles shown literally: {roles[:5]}"
    assert "``" not in reference.replace("```", ""), "double backquotes shown literally"
    assert "`AgentView`" in reference  # :class:`~mainspring.AgentView` became code


async def test_the_provider_guide_runs_as_written() -> None:
    """docs/providers.md: its provider (first block) passes its test (third block)."""
    page = (ROOT / "docs" / "providers.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", page, re.S)
    namespace: dict[str, object] = {}
    exec(compile(blocks[0] + "\n" + blocks[2], "docs/providers.md", "exec"), namespace)
    await namespace["test_the_echo_provider_streams_and_calls_tools"]()  # type: ignore[operator]


_WITHOUT = ["-p", "no:cacheprovider", "-p", "no:cov", "-p", "no:xdist"]
"""Plugins of this session the examples' session does without (its root is its directory,
which holds its pytest.ini)."""

_TEST_FILE = re.compile(r"^```python\n# (test_\w+\.py)\n(.*?)^```$", re.S | re.M)


def test_the_runnable_examples_of_the_docs_pass(tmp_path: Path) -> None:
    """Every docs block whose first line names a test file (``# test_NAME.py``) is that
    file; all of them pass under pytest, with mainspring's pytest plugin, as written."""
    import os
    import subprocess
    import sys

    written: list[str] = []
    for page in sorted((ROOT / "docs").glob("*.md")):
        for name, body in _TEST_FILE.findall(page.read_text(encoding="utf-8")):
            target = tmp_path / f"{page.stem.replace('-', '_')}_{name}"
            assert not target.exists(), f"{page.name} names {name} twice"
            target.write_text(body, encoding="utf-8")
            written.append(target.name)
    assert written, "no runnable example in docs/*.md"
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n"
        "filterwarnings = error\npython_files = *.py\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAINSPRING_")}
    env["MAINSPRING_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", str(tmp_path), "-q", *_WITHOUT],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "failed" not in done.stdout and "error" not in done.stdout.lower()
