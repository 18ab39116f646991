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


@pytest.fixture
def no_shims():
    """The test starts with no compat shim applied, and leaves the process's shims as it found them."""
    from triton_conformance import compat

    before = compat.installed(), compat.current_target()
    compat.uninstall()
    yield
    compat.uninstall()
    if before[0]:
        compat.install(before[0], target=before[1])
