"""The habits, enforced by the test command CI runs: ruff (lint and format) and mypy (strict on
table/format).  The tools come with the test extra (pyproject.toml), so `./run.sh test` has them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _run(tool: str, *args: str) -> None:
    exe = BIN / tool
    if not exe.exists():
        pytest.fail(
            f"{tool} is not installed beside {sys.executable}: install the test extra (./run.sh does)."
        )
    done = subprocess.run([str(exe), *args], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{tool} {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"


def test_ruff_lint():
    _run("ruff", "check", ".")


def test_ruff_format():
    _run("ruff", "format", "--check", ".")


def test_mypy():
    _run("mypy")  # files and flags: [tool.mypy] in pyproject.toml
