"""compat.fast_semantic: the interpreter's binary-operand type checks and broadcasts give what the originals give
(the same tensors back, the same broadcast shapes, types and values, the same errors) for the operands they take
and for those they hand back, and only on the interpreter's own semantic."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import numpy as np
import pytest
import triton.language as tl
from triton.language import core
from triton.language.semantic import TritonSemantic
from triton.runtime import interpreter

from triton_conformance import compat

pytestmark = [pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="the layer is interpreter-only"),
              pytest.mark.usefixtures("no_shims")]  # tests/cover/conftest.py: each test starts with none

SEMANTIC = interpreter.interpreter_semantic


def _tensor(dtype, shape=None, fill=1):
    """A tl.tensor of the interpreter: a block of ``shape`` (a list), or a scalar when None."""
    np_dtype = np.uint64 if dtype.is_ptr() else interpreter._get_np_dtype(dtype)
    if shape is None:
        return core.tensor(interpreter.TensorHandle(np.array([fill], dtype=np_dtype), dtype), dtype)
    data = (np.arange(int(np.prod(shape))) % 7 + fill).astype(np_dtype).reshape(shape)
    return core.tensor(interpreter.TensorHandle(data, dtype), tl.block_type(dtype, shape))


def _outcome(fn, operands, args):
    """What ``fn`` gave: for each returned tensor its type, values and whether it is an operand itself; or the
    error's type and text."""
    try:
        out = fn(*operands, *args)
    except Exception as error:  # noqa: BLE001 - the error is what is compared
        return ("raises", type(error), str(error))
    return ("value", [(str(t.type), t.dtype.name, [repr(d) for d in t.shape], t.handle.data.shape,
                       t.handle.data.tolist(), [t is o for o in operands]) for t in out])


def _pairs():
    f32, f16, i32 = tl.float32, tl.float16, tl.int32
    return [
        (_tensor(f32, [4, 8]), _tensor(f32, [4, 8])),  # the same shape: both come back as they are
        (_tensor(f32, [1, 8]), _tensor(f32, [4, 1])),  # each broadcast
        (_tensor(f32, [4, 1]), _tensor(f16, [4, 8])),  # the left one only
        (_tensor(i32, [4, 8]), _tensor(i32, [1, 8])),  # the right one only
        (_tensor(f32, [2, 1, 4]), _tensor(f32, [1, 8, 4])),
        (_tensor(f32, [4, 8]), _tensor(f32, [2, 8])),  # incompatible: the original's error
        (_tensor(f32, [8]), _tensor(f32, [4, 8])),  # ranks differ: new axes
        (_tensor(f32, [4, 8]), _tensor(f32, [8])),
        (_tensor(f32, [4, 8]), _tensor(f32)),  # block and scalar: a splat
        (_tensor(f32), _tensor(i32, [16])),
        (_tensor(f32), _tensor(f16)),  # two scalars
        (_tensor(tl.pointer_type(f32), [16]), _tensor(i32, [16])),
        (_tensor(i32, [16]), _tensor(tl.pointer_type(f32), [16])),
        (_tensor(tl.pointer_type(f32), [16]), _tensor(tl.pointer_type(f16), [16])),
        (_tensor(i32, [16]), _tensor(tl.uint32, [16])),
        (_tensor(tl.bfloat16, [1, 4]), _tensor(f16, [4, 1])),
        (_tensor(f16, [16]), 2.5),  # Python numbers go to the original
        (3, _tensor(tl.int8, [2, 2])),
        (_tensor(tl.uint8, [4]), -1),
    ]


def test_broadcast_is_the_originals_for_same_shapes_broadcasts_ranks_scalars_and_errors():
    original = TritonSemantic.broadcast_impl_value
    assert compat.install(["fast_paths"]) == ("fast_paths",)
    fast = SEMANTIC.broadcast_impl_value
    assert fast.__func__ is not original
    for lhs, rhs in _pairs():
        if isinstance(lhs, core.tensor) and isinstance(rhs, core.tensor):
            want = _outcome(lambda a, b: original(SEMANTIC, a, b), (lhs, rhs), ())
            assert _outcome(fast, (lhs, rhs), ()) == want, (lhs.type, rhs.type)
    same = _tensor(tl.float32, [4, 8]), _tensor(tl.float32, [4, 8])
    assert all(a is b for a, b in zip(fast(*same), same))


@pytest.mark.parametrize("flags", [(False, False, True, False), (True, True, True, False), (True, False, True, True),
                                   (False, False, False, False), (False, True, True, True)],
                         ids=["plain", "pointers-allowed", "lhs-pointer-div", "no-arithmetic", "rhs-pointer-div"])
def test_type_checking_is_the_originals_for_dtypes_pointers_numbers_and_errors(flags):
    original = TritonSemantic.binary_op_type_checking_impl
    assert compat.install(["fast_paths"]) == ("fast_paths",)
    fast = SEMANTIC.binary_op_type_checking_impl
    assert fast.__func__ is not original
    for lhs, rhs in _pairs():
        want = _outcome(lambda a, b, *f: original(SEMANTIC, a, b, *f), (lhs, rhs), flags)
        assert _outcome(fast, (lhs, rhs), flags) == want, (lhs, rhs)


def test_only_the_interpreters_semantic_changes_and_uninstall_restores_it():
    assert compat.install(["fast_paths"]) == ("fast_paths",)
    assert "broadcast_impl_value" in vars(SEMANTIC) and "binary_op_type_checking_impl" in vars(SEMANTIC)
    assert TritonSemantic(interpreter.interpreter_builder).broadcast_impl_value.__func__ is \
        TritonSemantic.broadcast_impl_value  # a compiler's semantic keeps the class's own
    compat.uninstall()
    assert "broadcast_impl_value" not in vars(SEMANTIC) and "binary_op_type_checking_impl" not in vars(SEMANTIC)
