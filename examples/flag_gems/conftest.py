"""The flag-gems example: its subjects are declared in gems_subjects.py (imported by the plugin only when
the battery runs, after the Triton interpreter and the compat layer are on)."""


def pytest_conformance_modules(config):
    return ["gems_subjects"]
