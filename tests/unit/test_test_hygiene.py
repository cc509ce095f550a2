"""Rules for the test tree itself.

Every test folder has its own conftest.py and pytest imports each as the module ``conftest``: an
``import`` of conftest inside a test function runs after collection and gets whichever conftest
pytest loaded last (in a full run, tests/unit/storage's), so such imports belong at module level,
where they run while the module's own conftest is the one loaded.
"""

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
INDENTED_CONFTEST_IMPORT = re.compile(r"^[ \t]+(from conftest import|import conftest)", re.M)


def test_no_test_imports_conftest_inside_a_function():
    offenders = []
    for path in TESTS.rglob("*.py"):
        text = path.read_text(errors="replace")
        for match in INDENTED_CONFTEST_IMPORT.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            before = text[:match.start()].rstrip().splitlines()[-2:] if match.start() else []
            if any(b.strip().startswith(("try:", "except ImportError")) for b in before):
                continue  # the package-or-rootdir fallback at module level
            offenders.append(f"{path.relative_to(TESTS)}:{line}")
    assert offenders == []
