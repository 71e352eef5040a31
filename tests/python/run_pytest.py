"""CTest's entry to the Python tests: runs pytest on this folder with the interpreter
the module was built for (/usr/bin/python3 unless MOE_ROUTING_PYTHON says otherwise).

Exits 77, which CTest reports as skipped, when pytest is not installed for it, and when
every test skipped itself (torch or NumPy missing: pytest.importorskip), so that a run
that tested nothing is never reported as passed.
"""

import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree

try:
    import pytest
except ImportError:
    print(f"skipped: pytest is not installed for {sys.executable} (apt-get install python3-pytest)")
    sys.exit(77)


class Outcomes:
    """Counts tests that ran (passed or failed) and skips, including whole skipped modules."""

    def __init__(self):
        self.ran = 0
        self.skipped = 0

    def pytest_runtest_logreport(self, report):
        if report.failed or (report.passed and report.when == "call"):
            self.ran += 1
        elif report.skipped:
            self.skipped += 1

    def pytest_collectreport(self, report):
        if report.failed:
            self.ran += 1
        elif report.skipped:
            self.skipped += 1


here = os.path.dirname(os.path.abspath(__file__))
outcomes = Outcomes()
# -p no:cacheprovider: never write .pytest_cache into the source tree.
code = pytest.main(["-q", "-rs", "-p", "no:cacheprovider", here, *sys.argv[1:]], plugins=[outcomes])
no_tests_collected = 5
if code in (0, no_tests_collected) and outcomes.ran == 0 and outcomes.skipped > 0:
    print(f"skipped: all {outcomes.skipped} tests or test files skipped themselves (reasons above)")
    sys.exit(77)
sys.exit(code)
