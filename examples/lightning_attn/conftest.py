"""The lightning-attn example: its subjects are declared in lightning_subjects.py (imported by the
plugin only when the battery runs, after the Triton interpreter is on)."""


def pytest_conformance_modules(config):
    return ["lightning_subjects"]
