"""Locating the non-Python clients (kcat, the Java client) that tests/tools/system-deps.sh installs.

In CI a missing tool is a failure, not a skip: a green run must mean the client really ran.
"""

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
JARS = ROOT / ".venv" / "java"


def require_tool(name: str) -> str:
    path = shutil.which(name)
    if path:
        return path
    message = f"{name} is not installed (make test installs it with tests/tools/system-deps.sh)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def require_java_jars() -> Path:
    if (JARS / "kafka-clients.jar").exists():
        return JARS
    message = f"Java client jars missing in {JARS} (make test unpacks them)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)
