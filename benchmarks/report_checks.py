"""What the report scripts' tests share: loading a report script as a module, and collecting
failed checks to print and exit on at the end. Standard library only."""
import importlib.util
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)  # the report scripts import their helpers (svg_chart) from here

failures = []


def load_report(name):
    """benchmarks/<name>.py as a module."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(here, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check(condition, what):
    if not condition:
        failures.append(what)


def finish(test_name):
    """Prints every failed check and exits 1 if there was one, else 0."""
    for failure in failures:
        print("FAILED:", failure)
    print(f"{test_name}: {'FAILED' if failures else 'passed'} ({len(failures)} failures)")
    sys.exit(1 if failures else 0)
