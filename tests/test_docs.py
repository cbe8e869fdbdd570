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
