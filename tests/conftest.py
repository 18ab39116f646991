"""Settings for this repo's own tests (the battery's cells choose their own, explicitly).

No example database: a test's ``find`` must not replay what another test saved
under the same key (two ``lambda n: True`` conditions share one), so a shrink
test's answer depends on its own search only, in a fresh CI checkout as here.
"""

from hypothesis import settings

settings.register_profile("triton-conformance-own-tests", database=None)
settings.load_profile("triton-conformance-own-tests")
