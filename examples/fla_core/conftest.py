"""The fla-core example: its subjects are declared in fla_subjects.py (imported by the plugin only
when the battery runs, after the Triton interpreter and the compat layer are on)."""


def pytest_conformance_modules(config):
    return ["fla_subjects"]
