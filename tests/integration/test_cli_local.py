"""``mainspring run`` on the embedded local model, as a user runs it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from mainspring.providers.local import is_available

pytestmark = pytest.mark.skipif(
    not is_available(), reason="the local model is not installed: run `mainspring install-model`"
)


def test_run_streams_a_real_answer_from_the_local_model() -> None:
    env = dict(os.environ)
    env.pop("MAINSPRING_MODEL", None)
    done = subprocess.run(
        [sys.executable, "-m", "mainspring", "run", "What is 2+2?"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip(), "the model streamed no text"
