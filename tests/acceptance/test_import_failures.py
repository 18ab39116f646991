"""A subject module that imports a library whose runtime refuses the interpreter (issue 23): the
import-error line keeps the exception's first line, and --conformance-cell on one of its cells says the
module failed to import."""

from __future__ import annotations

import textwrap

import pytest

# A library that checks the machine at import, as FlagGems' DeviceDetector does, with a message of two lines.
LIBRARY = textwrap.dedent('''
    def detect():
        raise RuntimeError("No device were detected on your machine ! \\n Please check that your driver is complete.")

    detect()
''')
SUBJECTS = textwrap.dedent('''
    import gpulib  # noqa: F401
    from triton_conformance import Dim, Tensor, subject

    @subject(inputs={"x": Tensor(("N",))}, dims={"N": Dim(1, 16)}, oracle=lambda x: x * 2)
    def gpu_double(x):
        return x * 2
''')
EMPTY_HEAD = "raise ValueError('\\n  the reason, on the second line\\n  and more')\n"


def _project(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(gpulib=LIBRARY, gpu_subjects=SUBJECTS, blank_head=EMPTY_HEAD)
    pytester.makeini("[pytest]\nconformance_modules =\n    gpu_subjects\n    blank_head\n")


def test_the_import_error_line_keeps_the_first_line_of_the_exception(pytester: pytest.Pytester) -> None:
    _project(pytester)
    result = pytester.runpytest_subprocess("--conformance-only", "-p", "no:randomly")
    result.stdout.fnmatch_lines_random([
        "cannot import subject module 'gpu_subjects': RuntimeError: No device were detected on your machine ! "
        "(gpulib.py:2); recorded as the crash cell gpu_subjects[[]import[]]",
        "cannot import subject module 'blank_head': ValueError: the reason, on the second line (blank_head.py:1); "
        "recorded as the crash cell blank_head[[]import[]]"])
    assert "Please check that your driver" not in result.stdout.str()  # the rest is in the traceback (-v)
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_a_cell_of_a_module_that_failed_to_import_says_so(pytester: pytest.Pytester) -> None:
    _project(pytester)
    result = pytester.runpytest_subprocess("--conformance-only", "--conformance-cell=gpu_double[layout:transposed]")
    result.stderr.fnmatch_lines([
        "ERROR: --conformance-cell='gpu_double[[]layout:transposed[]]' names no cell, *; subject module "
        "'gpu_subjects' failed to import (RuntimeError: No device were detected on your machine ! (gpulib.py:2)), "
        "so the cells it declares are unknown; subject module 'blank_head' failed to import (*)*"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    # The import cell itself can still be named.
    result = pytester.runpytest_subprocess("--conformance-only", "--conformance-cell=gpu_subjects[import]")
    result.assert_outcomes(failed=1)
