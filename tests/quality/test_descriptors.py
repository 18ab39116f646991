"""Tensor descriptors on the interpreter: every descriptor a launch builds is held to the hardware's rules,
and a descriptor's zero-filled loads past the tensor's shape are defined, not out-of-bounds reads."""

import pytest
import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from triton_conformance.compat.descriptors import recording
from triton_conformance.conformance.battery.forward import run_example
from triton_conformance.model.spec import Layout, Spec
from triton_conformance.strategies import build_inputs


@pytest.fixture(scope="module")
def subjects(backend, kernels):
    import tests.zoo.zoo_tma  # noqa: F401 - registers the buggy launcher

    from triton_conformance import get_subject

    return get_subject("tma_matmul"), get_subject("zoo_tma_matmul_unaligned_rows")


def test_a_host_descriptor_on_unaligned_rows_is_recorded_before_triton_asserts(backend):
    x = torch.randn(40, 31, dtype=torch.float16)  # rows of 62 bytes
    with recording() as uses:
        with pytest.raises(AssertionError):  # triton's own check, an assert (gone under python -O)
            TensorDescriptor.from_tensor(x, [32, 32])
        TensorDescriptor.from_tensor(torch.randn(40, 32, dtype=torch.float16), [32, 32])  # aligned: no record
    assert [(u.where, u.rules, u.strides) for u in uses] == [("host TensorDescriptor", ("strides",), (31, 1))]


@triton.jit
def copy_block_kernel(x_ptr, y_ptr, M, K, stride_xm, BLOCK: tl.constexpr):
    x_desc = tl.make_tensor_descriptor(x_ptr, shape=[M, K], strides=[stride_xm, 1], block_shape=[BLOCK, BLOCK])
    y_desc = tl.make_tensor_descriptor(y_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK, BLOCK])
    y_desc.store([0, 0], x_desc.load([0, 0]))


def test_a_descriptor_made_in_the_kernel_one_element_into_its_storage_is_recorded(backend):
    x = torch.randn(300, dtype=torch.float16)[1:257].view(16, 16)
    y = torch.empty(16, 16, dtype=torch.float16)
    with recording() as uses:
        with pytest.raises(Exception, match="16-byte aligned"):  # the interpreter's own assert
            copy_block_kernel[(1,)](x, y, 16, 16, 16, BLOCK=16)
    assert [(u.where, u.rules, u.shape) for u in uses] == [("tl.make_tensor_descriptor", ("base",), (16, 16))]


def test_a_launcher_that_hands_a_descriptor_unaligned_rows_is_unsafe(backend, subjects):
    _, buggy = subjects
    spec = Spec(dims={"M": 8, "K": 16, "N": 8}, dtypes={"a": "float16", "b": "float16"},
                layouts={"b": Layout("unaligned-rows", pad=1)})  # b's rows 9 elements apart; a is aligned
    found = run_example(buggy, spec, backend)
    assert (found.outcome, found.kind) == ("unsafe", "misaligned-descriptor")
    assert found.details["input"] == "b" and found.details["descriptor"]["rules"] == ["strides"]
    assert "input 'b'" in found.message and "18 bytes" in found.message


def test_the_correct_launcher_copies_the_same_view(backend, subjects):
    correct, _ = subjects
    spec = Spec(dims={"M": 8, "K": 16, "N": 8}, dtypes={"a": "float16", "b": "float16"},
                layouts={"b": Layout("unaligned-rows", pad=1)})
    assert run_example(correct, spec, backend) == "honoured"


def test_zero_filled_loads_past_the_shape_are_defined(backend, subjects):
    # Aligned inputs that the launcher reads in place, smaller than one block in every dim: each load runs past
    # M, K and N into the sentinel around the views, and the hardware (and the interpreter) fill it with zeros.
    from kernels_under_test.tma_matmul import BLOCK_K, descriptor_ready

    correct, _ = subjects
    spec = Spec(dims={"M": 5, "K": 24, "N": 8}, dtypes={"a": "float16", "b": "float16"}, layouts={})
    built = build_inputs(correct.contract, spec)
    assert all(descriptor_ready(v) is v for v in built.views.values()) and spec.dims["K"] < BLOCK_K
    assert run_example(correct, spec, backend) == "honoured"


def test_host_descriptors_are_checked_without_the_shim_as_on_a_gpu(backend):
    from triton_conformance import compat

    assert compat.uninstall(["descriptors"]) == ("descriptors",)
    try:
        unhooked = TensorDescriptor.__post_init__
        with recording() as uses:
            with pytest.raises(AssertionError):
                TensorDescriptor.from_tensor(torch.randn(64, dtype=torch.float16)[1:33], [32])
        assert [u.rules for u in uses] == [("base",)]
        assert TensorDescriptor.__post_init__ is unhooked  # put back when the call is over
    finally:
        compat.install(["descriptors"])


@triton.jit
def load_block_kernel(x_desc):
    x_desc.load([0, 0])


def test_a_block_past_the_hardwares_limits_is_recorded_where_triton_takes_it(backend):
    x = torch.randn(4, 512, dtype=torch.float16)  # aligned rows: only the block breaks a rule
    with recording() as uses:
        wide = TensorDescriptor.from_tensor(x, [1, 512])  # a power of two: triton builds it
        narrow = TensorDescriptor.from_tensor(x, [4, 4])  # a last block dim of 8 bytes
        assert uses == []  # built, not yet launched: a block may still change
        load_block_kernel[(1,)](wide)
        with pytest.raises(ValueError, match="at least 16 bytes"):  # triton's own check, after the record
            load_block_kernel[(1,)](narrow)
    assert [(u.where, u.rules, u.block_shape) for u in uses] == [
        ("host TensorDescriptor", ("block",), (1, 512)), ("host TensorDescriptor", ("block",), (4, 4))]


def test_a_placeholder_block_set_before_the_launch_is_not_a_finding(backend):
    # Triton's tutorials 06 and 09 build host descriptors on a block of [1, 1] (2 bytes: below the hardware's
    # 16) and their autotuner's pre_hook sets the config's block before the kernel runs.
    x = torch.randn(32, 64, dtype=torch.float16)
    with recording() as uses:
        desc = TensorDescriptor.from_tensor(x, [1, 1])
        desc.block_shape = [16, 16]
        load_block_kernel[(1,)](desc)
    assert uses == []
