"""``-p tests.hazards.plugin``: add the hazard subjects to whatever battery runs.

Used by the hazard acceptance test and bench/gpu/nightly_hazards.py; a plugin
rather than ``-o conformance_modules=...`` so the project's own subject
modules stay in the run.
"""

from tests.hazards import MODULES


def pytest_conformance_modules(config):
    return list(MODULES)
