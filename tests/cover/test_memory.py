"""Guarded, poisoned output allocations (conformance/memory.py)."""

import math
import struct

import pytest
import torch

from triton_conformance.conformance.battery.memory import (
    GUARD_BYTES,
    flat_bytes,
    guarded_allocations,
    poison_bytes,
    unwritten_elements,
)

FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
ALL = FLOATS + [torch.int8, torch.int32, torch.int64, torch.uint8]
FACTORIES = {
    "empty": lambda ref: torch.empty((3, 5), dtype=ref.dtype),
    "empty_like": lambda ref: torch.empty_like(ref),
    "empty_strided": lambda ref: torch.empty_strided((3, 5), (5, 1), dtype=ref.dtype),
    "new_empty": lambda ref: ref.new_empty((3, 5)),
    "zeros": lambda ref: torch.zeros((3, 5), dtype=ref.dtype),
    "zeros_like": lambda ref: torch.zeros_like(ref),
    "new_zeros": lambda ref: ref.new_zeros((3, 5)),
}


def name(d):
    return str(d).replace("torch.", "")


@pytest.mark.parametrize("dtype", FLOATS, ids=name)
def test_float_poison_is_a_nan_that_arithmetic_does_not_produce(dtype):
    raw = poison_bytes(dtype)
    assert len(raw) == dtype.itemsize
    value = torch.frombuffer(bytearray(raw), dtype=dtype)
    assert bool(torch.isnan(value).all())
    # the NaNs torch makes are not the poison
    for made in (torch.tensor([float("nan")], dtype=dtype), torch.zeros(1, dtype=dtype) / 0,
                 torch.tensor([float("inf")], dtype=dtype) - float("inf")):
        assert made.view(torch.uint8).numpy().tobytes() != raw


@pytest.mark.parametrize("kind", list(FACTORIES))
@pytest.mark.parametrize("dtype", ALL, ids=name)
def test_factories_are_served_from_guarded_buffers(kind, dtype):
    ref = torch.ones((3, 5), dtype=dtype)
    with guarded_allocations() as log:
        t = FACTORIES[kind](ref)
    assert len(log) == 1
    alloc = log[0]
    assert alloc.tensor is t and alloc.owns(t)
    assert t.shape == (3, 5) and t.dtype == dtype and t.stride() == (5, 1)
    assert alloc.span_bytes == 15 * dtype.itemsize
    assert alloc.buffer.numel() == GUARD_BYTES + alloc.span_bytes + GUARD_BYTES
    assert t.data_ptr() == alloc.buffer.data_ptr() + GUARD_BYTES
    assert alloc.guard_damage() == []
    if kind.startswith(("zeros", "new_zeros")):
        assert bool((t == 0).all()) and not bool(unwritten_elements(t).any())
    else:
        assert bool(unwritten_elements(t).all())
    # guard bands hold poison on both sides
    poison = poison_bytes(dtype)
    raw = alloc.buffer.numpy().tobytes()
    assert raw[:GUARD_BYTES] == poison * (GUARD_BYTES // len(poison))
    assert raw[-GUARD_BYTES:] == poison * (GUARD_BYTES // len(poison))


def test_factories_are_restored_afterwards_even_on_error():
    originals = (torch.empty, torch.empty_like, torch.zeros, torch.Tensor.new_empty, torch.Tensor.new_zeros)
    with pytest.raises(KeyError):
        with guarded_allocations():
            assert torch.empty is not originals[0]
            raise KeyError("boom")
    assert (torch.empty, torch.empty_like, torch.zeros, torch.Tensor.new_empty, torch.Tensor.new_zeros) == originals
    with guarded_allocations() as log:
        pass
    torch.empty(3)
    assert log == []


def test_empty_like_keeps_the_layout_of_a_dense_permuted_input():
    x = torch.ones(4, 6).t()  # (6, 4) with strides (1, 6)
    with guarded_allocations() as log:
        out = torch.empty_like(x)
    assert out.stride() == torch.empty_like(x).stride() == (1, 6)
    assert log[0].span_bytes == 24 * 4
    assert log[0].guard_damage() == []


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64], ids=name)
@pytest.mark.parametrize("index", [24, 25, 30], ids=lambda i: f"past+{i - 24}")
def test_a_write_past_the_end_damages_the_after_band(dtype, index):
    with guarded_allocations() as log:
        out = torch.empty((4, 6), dtype=dtype)
    out.fill_(1)
    torch.as_strided(out, (index + 1,), (1,), out.storage_offset())[index] = 0
    span = 24 * dtype.itemsize
    assert log[0].guard_damage() == [("after", span + (index - 24) * dtype.itemsize)]
    assert not bool(unwritten_elements(out).any())


@pytest.mark.parametrize("side", ["before", "after"])
def test_a_band_written_while_every_element_kept_its_poison_is_damage(side):
    # The bands are compared at once, as one view over both: the one after the span, not the span's start.
    with guarded_allocations() as log:
        out = torch.empty((3, 5))
    at = -1 if side == "before" else 15 + GUARD_BYTES // 4 - 1  # the band's first element, or its last
    torch.as_strided(out, (at + 2,), (1,), out.storage_offset() - 1)[at + 1] = 0
    assert bool(unwritten_elements(out).all())
    assert [s for s, _ in log[0].guard_damage()] == [side]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=name)
def test_a_write_before_the_start_damages_the_before_band(dtype):
    with guarded_allocations() as log:
        out = torch.empty((8,), dtype=dtype)
    torch.as_strided(out, (9,), (1,), out.storage_offset() - 1)[0] = 0
    assert log[0].guard_damage() == [("before", -dtype.itemsize)]


def test_writes_on_both_sides_are_both_reported():
    with guarded_allocations() as log:
        out = torch.empty((8,))
    torch.as_strided(out, (10,), (1,), out.storage_offset() - 1)[[0, 9]] = 0
    assert [side for side, _ in log[0].guard_damage()] == ["before", "after"]


def test_writing_inside_the_tensor_is_not_damage():
    with guarded_allocations() as log:
        out = torch.empty((5, 7))
        out.copy_(torch.arange(35.0).view(5, 7))
    assert log[0].guard_damage() == []


def test_unwritten_elements_marks_exactly_the_holes():
    with guarded_allocations():
        out = torch.empty((4, 5))
    out[:, :3] = 1.0
    out[3, 4] = float("nan")  # a NaN the kernel computed is written, not a hole
    holes = unwritten_elements(out)
    expected = torch.zeros(4, 5, dtype=torch.bool)
    expected[:, 3:] = True
    expected[3, 4] = False
    assert torch.equal(holes, expected)


def test_unwritten_elements_on_views_and_empty_tensors():
    with guarded_allocations():
        out = torch.empty((6, 4))
    out[::2] = 0.0
    assert torch.equal(unwritten_elements(out.t()), unwritten_elements(out).t())
    assert unwritten_elements(out[:0]).shape == (0, 4)


POISONED_DTYPES = [torch.int8, torch.uint8, torch.bool, torch.int16, torch.int32, torch.int64, torch.float16,
                   torch.bfloat16, torch.float32, torch.float64]


@pytest.mark.parametrize("dtype", POISONED_DTYPES, ids=[str(d).removeprefix("torch.") for d in POISONED_DTYPES])
def test_the_two_poisons_differ_in_every_byte(dtype):
    # A one-byte result can equal one poison; it cannot equal both, and an element
    # only counts as unwritten when it kept the poison in both calls of an example.
    # Every byte differs, so whatever part of an unwritten element a kernel reads
    # (its sign and exponent byte too) differs between the two calls.
    zero, one = poison_bytes(dtype, 0), poison_bytes(dtype, 1)
    assert len(zero) == len(one) == dtype.itemsize
    same = [i for i in range(dtype.itemsize) if zero[i] == one[i]]
    assert not same, f"poisons {zero.hex()} and {one.hex()} share byte(s) {same}"
    if dtype.is_floating_point:  # both NaNs that arithmetic never makes: signalling (quiet bit clear)
        quiet_bit = round(-math.log2(torch.finfo(dtype).eps)) - 1  # the top bit of the mantissa
        for pattern in (zero, one):
            assert bool(torch.isnan(torch.frombuffer(bytearray(pattern), dtype=dtype))), pattern.hex()
            assert not int.from_bytes(pattern, "little") >> quiet_bit & 1, pattern.hex()
    for variant, pattern in ((0, zero), (1, one)):
        with guarded_allocations(variant=variant):
            out = torch.empty((4,), dtype=dtype)
        assert bytes(out.view(torch.uint8).tolist()) == pattern * 4  # each element holds its variant's poison
        assert bool(unwritten_elements(out, variant).all())
        assert not bool(unwritten_elements(out, 1 - variant).any())


def test_zero_size_allocations_are_guarded_too():
    with guarded_allocations() as log:
        out = torch.empty((0, 3))
    assert out.shape == (0, 3) and log[0].span_bytes == 0
    assert log[0].guard_damage() == []
    log[0].buffer[GUARD_BYTES] = 0
    assert log[0].guard_damage() == [("after", 0)]


def test_device_override_moves_hard_coded_devices():
    with guarded_allocations(device_override="cpu") as log:
        out = torch.empty((3,), device="meta")
    assert out.device.type == "cpu" and len(log) == 1


def test_requires_grad_allocations_pass_through_unguarded():
    with guarded_allocations() as log:
        out = torch.empty((3,), requires_grad=True)
    assert out.requires_grad and log == []


def test_owns_only_tensors_on_its_buffer():
    with guarded_allocations() as log:
        a = torch.empty((4,))
        b = torch.empty((4,))
    assert log[0].owns(a) and log[0].owns(a.view(2, 2)[1])
    assert not log[0].owns(b) and not log[0].owns(torch.ones(4))


def test_flat_bytes_is_row_major_bytes():
    t = torch.arange(6, dtype=torch.float32).view(2, 3).t()
    expected = b"".join(struct.pack("<f", v) for v in (0, 3, 1, 4, 2, 5))
    assert flat_bytes(t).numpy().tobytes() == expected
