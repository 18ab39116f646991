"""Keep the subject registry as it was: subjects declared by a test are gone after it."""

import pytest

from triton_conformance.model.subject import registry


@pytest.fixture(autouse=True)
def _restore_registry():
    before = list(registry)
    yield
    if list(registry) != before:
        registry.clear()
        for subject in before:
            registry.add(subject)
