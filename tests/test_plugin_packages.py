"""A plugin author's first package, built and tested the way they would, in a fresh venv.

- The tutorial: ``docs/first-plugin.md``'s own code blocks (each starts with the path of
  its file; ``(continued)`` appends) make a package that installs with ``pip install -e``
  and whose tests pass.
- The template: ``mainspring new-plugin NAME`` writes a package that does the same.

The builds are slow (a package build each), so they run with ``MAINSPRING_SLOW_TESTS=1``
(``.ci/run`` does). The venv is new and empty but for one ``.pth`` line that adds this
environment's
site-packages (mainspring, its dependencies, pytest) behind its own; pip builds the
package with its build backend from the package registry (or pip's cache).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TUTORIAL = ROOT / "docs" / "first-plugin.md"

slow = pytest.mark.skipif(
    os.environ.get("MAINSPRING_SLOW_TESTS") != "1",
    reason="package builds run with MAINSPRING_SLOW_TESTS=1 (.ci/run does)",
)

_BLOCK = re.compile(r"^```(python|toml)\n(.*?)^```$", re.S | re.M)
_PATH = re.compile(r"# (\S+)( \(continued\))?$")


def tutorial_files(markdown: str) -> dict[str, str]:
    """The files the page's code blocks make, by relative path."""
    files: dict[str, str] = {}
    for _, body in _BLOCK.findall(markdown):
        first, _, rest = body.partition("\n")
        named = _PATH.fullmatch(first.strip())
        if named is None:
            continue
        path, continued = named.groups()
        if re.fullmatch(r"test_\w+\.py", path):
            continue  # a runnable example of the page (tests/test_docs.py runs those)
        if continued:
            assert path in files, f"{path} is continued before it starts"
            files[path] += rest
        else:
            assert path not in files, f"{path} starts twice"
            files[path] = rest
    return files


def fresh_venv(where: Path) -> Path:
    """A new venv that sees this environment's packages after its own; its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    python = where / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    ours = sysconfig.get_paths()["purelib"]
    Path(purelib, "zz_outer_environment.pth").write_text(
        f"import site; site.addsitedir({ours!r})\n"
    )
    return python


def run(args: list[str], cwd: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAINSPRING_", "PYTHON"))}
    env.update(extra)
    done = subprocess.run(
        args, cwd=cwd, capture_output=True, text=True, env=env, timeout=600, check=False
    )
    assert done.returncode == 0, f"{' '.join(args)}\n{done.stdout}\n{done.stderr}"
    return done


def install_and_test(package: Path, venv: Path, distribution: str, tests: int) -> None:
    python = fresh_venv(venv)
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--quiet",
            "--no-deps",
            "-e",
            str(package),
        ],
        package,
    )
    done = run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider"], package)
    assert f"{tests} passed" in done.stdout, done.stdout
    # the allowlist leaves out the examples this environment has installed
    listing = [str(python), "-m", "mainspring", "plugins", "--json"]
    listed = run(listing, package, MAINSPRING_PLUGINS=distribution)
    [row] = [r for r in json.loads(listed.stdout) if r["distribution"] == distribution]
    assert row["source"] == "entrypoint" and row["tools"], row


@slow
def test_the_tutorial_page_builds_a_package_whose_tests_pass(tmp_path: Path) -> None:
    files = tutorial_files(TUTORIAL.read_text(encoding="utf-8"))
    assert set(files) == {
        "pyproject.toml",
        "src/mainspring_greeter/__init__.py",
        "tests/test_greeter.py",
    }
    package = tmp_path / "mainspring-greeter"
    for relative, text in files.items():
        (package / relative).parent.mkdir(parents=True, exist_ok=True)
        (package / relative).write_text(text)
    install_and_test(package, tmp_path / "venv", "mainspring-greeter", tests=3)


@slow
def test_the_new_plugin_template_builds_a_package_whose_tests_pass(tmp_path: Path) -> None:
    run([sys.executable, "-m", "mainspring", "new-plugin", "mainspring-shouter"], tmp_path)
    package = tmp_path / "mainspring-shouter"
    install_and_test(package, tmp_path / "venv", "mainspring-shouter", tests=5)


def test_the_tutorial_does_not_reuse_an_example_name() -> None:
    """Following the page must not replace an installed example of this repository."""
    name = re.search(
        r'^name = "(.+)"$', tutorial_files(TUTORIAL.read_text())["pyproject.toml"], re.M
    )
    assert name is not None
    examples = {p.name for p in (ROOT / "examples").iterdir() if p.is_dir()}
    assert name.group(1) not in examples
