"""Hazard subjects: kernels that crash, hang or fail to compile, to prove the battery survives them.

Each module declares one subject whose every in-contract example is a hazard;
out-of-contract inputs are rejected cleanly by the launcher, as a correct
subject would.  ``HAZARDS`` says what each one must be recorded as, on either
back end::

    ("hazard_crash", "crash")             # a store far outside memory
    ("hazard_hang", "timeout")            # spins on a flag nobody sets
    ("hazard_compile", "compile-error")   # a tile larger than shared memory

Nothing imports these modules except a run that asks for them with
``-p tests.hazards.plugin`` (the acceptance test, bench/gpu/nightly_hazards.py),
so the kernel battery is unchanged.
"""

MODULES = ("tests.hazards.hazard_crash", "tests.hazards.hazard_hang", "tests.hazards.hazard_compile")

HAZARDS = (
    ("hazard_crash", "crash"),
    ("hazard_hang", "timeout"),
    ("hazard_compile", "compile-error"),
)
