"""Specialization classes (conformance/specializations.py): what Triton would compile anew, and steering.

The compile budget's fair share and the search's use of it are tested in
test_compiles.py; this file tests the classes themselves.
"""

from hypothesis import given, settings
from hypothesis import strategies as st

import triton_conformance as tc
from triton_conformance import Dim, Tensor
from triton_conformance.conformance.search.specializations import nearest_in_class, signature, size_class, steer
from triton_conformance.model.spec import Layout, Spec

CONTRACT = tc.Contract(inputs={"x": Tensor(("M", "N"), dtypes=("float16", "float32"))},
                       dims={"M": Dim(1, 64), "N": Dim(1, 8192)}, oracle=lambda x: x)


def spec(m=4, n=100, dtype="float32", **layout):
    return Spec(dims={"M": m, "N": n}, dtypes={"x": dtype}, layouts={"x": Layout(**layout)} if layout else {})


def test_sizes_of_one_block_and_int_class_share_a_signature():
    assert signature(CONTRACT, spec(n=100)) == signature(CONTRACT, spec(n=101))  # block 128, neither 1 nor %16
    assert signature(CONTRACT, spec(n=100)) != signature(CONTRACT, spec(n=112))  # a multiple of 16: its own
    assert signature(CONTRACT, spec(n=100)) != signature(CONTRACT, spec(n=129))  # the next block
    assert signature(CONTRACT, spec(m=1)) != signature(CONTRACT, spec(m=3))  # == 1 is a class of its own


def test_alignment_depends_on_the_offset_in_bytes():
    # 8 fp16 elements are 16 bytes (aligned); 8 fp32 elements are 32 (aligned); 4 fp16 are 8 (not).
    aligned = signature(CONTRACT, spec(n=96, dtype="float16"))
    assert signature(CONTRACT, spec(n=96, dtype="float16", kind="offset", offset=8))[1] == aligned[1]
    assert signature(CONTRACT, spec(n=96, dtype="float16", kind="offset", offset=4))[1] != aligned[1]
    assert signature(CONTRACT, spec(n=96, kind="offset", offset=4)) == signature(CONTRACT, spec(n=96))


def test_strides_are_classed_as_triton_does():
    contiguous = signature(CONTRACT, spec(n=96))[1][0][3]
    transposed = signature(CONTRACT, spec(n=96, kind="transposed", perm=(1, 0)))[1][0][3]
    broadcast = signature(CONTRACT, spec(n=96, kind="broadcast", broadcast=(0,)))[1][0][3]
    assert contiguous == ("div16", "one") and transposed == ("one", "other") and broadcast == ("0", "one")
    assert signature(CONTRACT, spec(n=100))[1][0][3] == ("other", "one")  # a row stride of 100


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 5000), st.integers(0, 5000), st.integers(0, 13), st.sampled_from(["one", "div16", "other"]),
       st.booleans())
def test_the_nearest_size_in_a_class_is_in_it_and_in_range(n, lo, k, kind, upwards):
    hi = lo + 700
    block = 1 << k
    moved = nearest_in_class(n, (block, kind), lo, hi, upwards=upwards)
    if moved is None:  # no size of the class in range, within 16 of the nearest end
        first, last = max(lo, block // 2 + 1), min(hi, block)
        members = [v for v in range(max(first, 0), last + 1) if v and size_class(v) == (block, kind)]
        assert not members or kind != "one" and min(abs(v - min(max(n, first), last)) for v in members) > 16
        return
    assert lo <= moved <= hi and size_class(moved) == (block, kind)
    if size_class(n) == (block, kind) and lo <= n <= hi:
        assert moved == n  # already in the class: unmoved


def test_steering_moves_dims_into_a_compiled_class_and_keeps_the_rest():
    compiled = spec(m=4, n=100)
    drawn = Spec(dims={"M": 4, "N": 1000}, dtypes={"x": "float32"}, layouts={"x": Layout("offset", offset=3)},
                 values="huge", seed=42)
    classes = {signature(CONTRACT, spec(m=4, n=100, kind="offset", offset=3)): compiled}
    moved = steer(CONTRACT, drawn, classes, admissible=lambda c: True)
    assert moved is not None and moved.dims["N"] != 1000 and size_class(moved.dims["N"]) == size_class(100)
    assert (moved.layouts, moved.values, moved.seed, moved.dtypes) == (drawn.layouts, "huge", 42, drawn.dtypes)
    assert signature(CONTRACT, moved) in classes


def test_steering_respects_what_the_cell_admits_and_finds_nothing_across_dtypes():
    classes = {signature(CONTRACT, spec(n=100)): spec(n=100)}
    drawn = spec(n=1000)
    assert steer(CONTRACT, drawn, classes, admissible=lambda c: c.dims["N"] >= 1000) is None
    assert steer(CONTRACT, spec(n=1000, dtype="float16"), classes, admissible=lambda c: True) is None


def test_a_class_the_cell_ran_itself_lends_its_layouts_and_dtypes():
    ran = spec(m=4, n=100, dtype="float16", kind="sliced", steps=(1, 2))
    classes = {signature(CONTRACT, ran): ran}
    drawn = Spec(dims={"M": 8, "N": 3000}, dtypes={"x": "float32"}, layouts={"x": Layout("sliced", steps=(2, 1))},
                 seed=7)
    assert steer(CONTRACT, drawn, classes, admissible=lambda c: True) is None  # another cell's class: no
    moved = steer(CONTRACT, drawn, classes, admissible=lambda c: True, own=set(classes))
    assert moved is not None and signature(CONTRACT, moved) == signature(CONTRACT, ran)
    assert moved.dtypes == ran.dtypes and moved.layouts == ran.layouts and moved.seed == 7
