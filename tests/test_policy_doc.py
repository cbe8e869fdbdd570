"""docs/policy.md runs as written: its Python blocks, joined, define tools and a gate
whose test (``test_*`` coroutines) passes."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


async def test_the_policy_guide_runs_as_written() -> None:
    page = (ROOT / "docs" / "policy.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", page, re.S)
    namespace: dict[str, object] = {"__name__": "policy_doc"}
    exec(compile("\n".join(blocks), "docs/policy.md", "exec"), namespace)
    tests = [value for name, value in namespace.items() if name.startswith("test_")]
    assert tests
    for test in tests:
        await test()  # type: ignore[operator]
