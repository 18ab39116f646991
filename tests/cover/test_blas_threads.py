"""An interpreter cell runs numpy's OpenBLAS on one thread, and gives the threads back after it.

The interpreter's ``tl.dot`` is a block-sized ``np.matmul``; with OpenBLAS's
threads spin-waiting for each other around each one, a cell's counted units
cost several times the seconds they were fitted to (docs/performance.md).
"""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import ctypes

import numpy as np
import pytest
import torch

import triton_conformance as tc
from triton_conformance import Dim, Tensor
from triton_conformance.conformance.backend import Backend
from triton_conformance.conformance.runner import run_cell
from triton_conformance.conformance.search import blas_threads
from triton_conformance.model.config import RunConfig

pytestmark = pytest.mark.skipif(blas_threads.openblas_threads() is None or (os.cpu_count() or 1) < 2,
                                reason="numpy's BLAS is not an OpenBLAS this process can ask, or one core only")


@pytest.fixture
def two_threads():
    """OpenBLAS on two threads before the cell, as it starts on a machine of two cores or more."""
    before = blas_threads.openblas_threads()
    setters = [s for s, _ in blas_threads._openblas() if s is not None]
    for set_threads in setters:
        set_threads(ctypes.c_int(2))
    yield
    for set_threads in setters:
        set_threads(ctypes.c_int(before))


def _recording(seen: list):
    def matmul_rows(x):
        seen.append(blas_threads.openblas_threads())
        return torch.from_numpy(np.matmul(x.numpy(), np.eye(x.shape[1], dtype=np.float32)))

    return matmul_rows


def _subject(name: str, seen: list):
    return tc.register(_recording(seen), name=name, family="cover_blas_threads",
                       inputs={"x": Tensor(("M", "N"), dtypes=("float32",))},
                       dims={"M": Dim(1, 8), "N": Dim(1, 8)}, oracle=lambda x: x)


def test_an_interpreter_cell_calls_its_launcher_with_one_blas_thread_and_restores_them(two_threads):
    seen = []
    result = run_cell(_subject("cover_blas_one_thread", seen), "layout:contiguous", backend=Backend(),
                      config=RunConfig(isolation="none"))
    assert result.outcome == "honoured" and seen, result.message
    assert set(seen) == {1}, seen
    assert blas_threads.openblas_threads() == 2  # the process's own setting is back after the cell


def test_a_cuda_cell_leaves_blas_alone(two_threads):
    seen = []
    result = run_cell(_subject("cover_blas_cuda_threads", seen), "layout:contiguous",
                      backend=Backend("cuda", device="cpu"), config=RunConfig(isolation="none"))
    assert seen and set(seen) == {2}, (seen, result.outcome, result.message)


def test_the_threads_are_restored_when_the_block_raises(two_threads):
    with pytest.raises(RuntimeError), blas_threads.one_blas_thread():
        assert blas_threads.openblas_threads() == 1
        raise RuntimeError("a cell's harness error")
    assert blas_threads.openblas_threads() == 2
