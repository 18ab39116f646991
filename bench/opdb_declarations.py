"""The generic declaration of one op of torch's OpInfo database (bench/opdb_calibration.py runs them).

Its dims, dtypes, layouts and in-place inputs come from the op's sample and from probing the op, one
rule for every op (the calibration script's docstring lists them); :func:`declarations` yields one
:class:`Declaration` per float op, with the reason where the op cannot be declared generically.
"""

from __future__ import annotations

import collections
import sys
import warnings

FLOATS = ("float16", "bfloat16", "float32")
# A dim's range by the largest rank it appears in: a rank-3 input of 48^3 is 110k elements.
DIM_MAX = {1: 4096, 2: 256, 3: 48}
SYMBOLS = "ABCDEFGHJKLMNPQRSTUVWXYZ"


def op_label(op) -> str:
    variant = getattr(op, "variant_test_name", "")
    return op.name + (f".{variant}" if variant else "")


def _dtypes_of(op, method: str, device: str) -> set:
    """``op.supported_dtypes(device)`` (or ``supported_backward_dtypes``), empty where an older OpInfo
    lacks the method or fails for the device (torch 2.11 on the H200)."""
    try:
        return set(getattr(op, method)(device))
    except Exception:  # noqa: BLE001 - an OpInfo of another torch version: the op is left out, with its reason
        return set()


def _import_op_db():
    """torch's OpInfo database.  Its test utilities import ``expecttest``; where that is not installed
    (a GPU host with torch alone), a stand-in with the one name they use at import time."""
    try:
        import expecttest  # noqa: F401
    except ImportError:
        import types
        import unittest

        stand_in = types.ModuleType("expecttest")
        stand_in.TestCase = type("TestCase", (unittest.TestCase,), {})
        sys.modules["expecttest"] = stand_in
        print("expecttest is not installed: a stand-in lets torch's OpInfo database import", flush=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torch.testing._internal.common_methods_invocations import op_db
    return op_db


def subject_name(op) -> str:
    return "op_" + "".join(c if c.isalnum() else "_" for c in op_label(op))


def _sample(op, torch):
    """The op's first sample whose tensors are all float32, of rank 1-3, none empty, none inside a list."""
    for s in op.sample_inputs("cpu", torch.float32, requires_grad=False):
        if not isinstance(s.input, torch.Tensor):
            continue
        if any(isinstance(v, torch.Tensor) for v in s.kwargs.values()):
            continue
        if any(isinstance(a, (list, tuple)) and any(isinstance(b, torch.Tensor) for b in a) for a in s.args):
            continue
        tensors = [a for a in (s.input, *s.args) if isinstance(a, torch.Tensor)]
        if all(t.dtype == torch.float32 and 1 <= t.dim() <= 3 and t.numel() > 0 for t in tensors):
            return s
    return None


UNINITIALIZED = {"empty", "empty_like", "new_empty", "empty_strided", "new_empty_strided", "resize_",
                 "resize_as_"}


def _aten_calls(fn, torch) -> set:
    """The aten overloads ``fn`` dispatches to (a dispatch mode records them), whatever the OpInfo wraps."""
    from torch.utils._python_dispatch import TorchDispatchMode

    called = set()

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            called.add(func)
            return func(*args, **(kwargs or {}))

    with Record():
        fn()
    return called


def _written_inputs(fn, tensors, torch) -> list[int]:
    """Which of ``tensors`` ``fn`` writes into, as the schemas of the aten ops it dispatches to say it (an
    argument annotated ``Tensor(a!)`` that shares an input's storage): the op's documented in-place outputs
    (a training batch norm's running statistics), not a guess from the values."""
    from torch.utils._python_dispatch import TorchDispatchMode

    storages = {t.untyped_storage().data_ptr(): k for k, t in enumerate(tensors)}
    written = set()

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            for i, arg in enumerate(func._schema.arguments):
                value = args[i] if i < len(args) else kwargs.get(arg.name)
                if (arg.alias_info is not None and arg.alias_info.is_write and isinstance(value, torch.Tensor)
                        and value.untyped_storage().data_ptr() in storages):
                    written.add(storages[value.untyped_storage().data_ptr()])
            return func(*args, **kwargs)

    with Record():
        fn()
    return sorted(written)


def _float_outputs(out, torch) -> tuple | None:
    """The float tensors among an op's outputs (None if there are none)."""
    outs = out if isinstance(out, (tuple, list)) else (out,)
    floats = tuple(o for o in outs if isinstance(o, torch.Tensor) and o.is_floating_point())
    return floats or None


class Declaration:
    """One op's generic declaration, or the reason it has none (``skip``)."""

    def __init__(self, op, torch, device: str) -> None:
        self.op, self.label, self.skip, self.device = op, op_label(op), None, device
        self.dtypes = tuple(d for d in FLOATS if getattr(torch, d) in _dtypes_of(op, "supported_dtypes", device))
        if not self.dtypes:
            self.skip = "no float16, bfloat16 or float32 dtype"
            return
        sample = _sample(op, torch)
        if sample is None:
            self.skip = "no sample of float tensors of rank 1-3"
            return
        self.args = [a if isinstance(a, torch.Tensor) else ("fixed", a) for a in (sample.input, *sample.args)]
        self.kwargs = dict(sample.kwargs)
        # What of the output is defined, as the OpInfo says it for torch's own gradient tests: svd's and
        # eigh's vectors up to their signs (|U|), linalg.lu's factors without the pivots' permutation.
        self.defined = getattr(sample, "output_process_fn_grad", None) or (lambda out: out)
        self.positions = [i for i, a in enumerate(self.args) if isinstance(a, torch.Tensor)]
        self.names = [f"x{i}" for i in range(len(self.positions))]
        sizes = sorted({n for i in self.positions for n in self.args[i].shape if n != 1})
        self.symbol = {n: SYMBOLS[k] for k, n in enumerate(sizes[:len(SYMBOLS)])}
        if len(sizes) > len(SYMBOLS):
            self.skip = "more distinct sizes than dim symbols"
            return
        self.shapes = [tuple(self.symbol.get(n, "ONE") for n in self.args[i].shape) for i in self.positions]
        rank = collections.defaultdict(int)
        for shape in self.shapes:
            for s in shape:
                rank[s] = max(rank[s], len(shape))
        self.dim_max = {s: (1 if s == "ONE" else DIM_MAX[r]) for s, r in rank.items()}
        self.domain = tuple(getattr(op, "domain", (None, None)) or (None, None))
        self.skip = self._probe(torch)
        self.dim_min = self._smallest(torch) if self.skip is None else 1
        if self.skip is None:
            self._relate(torch)

    owns_storage = False  # set by the probe: the op addresses its inputs' storage (strides, an offset)

    def call(self, tensors, torch):
        if self.owns_storage:
            tensors = [t.clone(memory_format=torch.contiguous_format) for t in tensors]
        args = list(self.args)
        for i, t in zip(self.positions, tensors):
            args[i] = t
        args = [a[1] if isinstance(a, tuple) and len(a) == 2 and a[0] == "fixed" else a for a in args]
        return _float_outputs(self.defined(self.op.op(*args, **self.kwargs)), torch)

    def _draw(self, dims, dtype, torch, generator):
        tensors = []
        for k, shape in enumerate(self.shapes):
            t = torch.randn(tuple(dims[s] for s in shape), generator=generator, dtype=torch.float64)
            if k == 0:
                lo, hi = self.domain
                if lo is not None or hi is not None:
                    lo = -8.0 if lo is None else lo
                    hi = 8.0 if hi is None else hi
                    t = lo + (hi - lo) * torch.rand(t.shape, generator=generator, dtype=torch.float64)
            tensors.append(t.to(dtype))
        return tensors

    def _probe(self, torch) -> str | None:
        """Why the declaration is not generic, or None: the op at other sizes, in float32 and float64."""
        generator = torch.Generator().manual_seed(0)
        shapes_out = None
        for attempt in range(3):
            dims = {s: (1 if m == 1 else min(m, 5 + 7 * attempt + 3 * k))
                    for k, (s, m) in enumerate(sorted(self.dim_max.items()))}
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    x32 = self._draw(dims, torch.float32, torch, generator)
                    low = self.call(x32, torch)
                    again = self.call([t.clone() for t in x32], torch)
                    high = self.call([t.double() for t in x32], torch)
            except Exception as exc:  # noqa: BLE001 - any error: the sample's fixed arguments need its sizes
                return f"fails at other sizes ({type(exc).__name__}: {str(exc).splitlines()[0][:80]})"
            if low is None or high is None or len(low) != len(high):
                return "no float output"
            if any(a.shape != b.shape for a, b in zip(low, high)):
                return "float64 output shaped otherwise"
            if any(not torch.equal(a.nan_to_num(nan=0.5), b.nan_to_num(nan=0.5)) for a, b in zip(low, again)):
                return "random output"
            called = _aten_calls(lambda x=x32: self.call([t.clone() for t in x], torch), torch)
            if any(torch.Tag.nondeterministic_seeded in f.tags for f in called):
                return "random output (an op tagged nondeterministic_seeded)"
            if any(f.name().split("::")[-1].split(".")[0] in UNINITIALIZED for f in called):
                return "returns uninitialized memory"
            # An op that takes strides and a storage offset addresses its input's storage, not its elements
            # (as_strided): its meaning is defined on a tensor that owns its storage, as the OpInfo's samples
            # are, so it is handed its inputs' elements as such a tensor (a view's offset, another layout's
            # strides or the guard band around it would mean other elements).
            self.owns_storage = any({"stride", "storage_offset"} <= {a.name for a in f._schema.arguments}
                                    for f in called)
            if any(o.dtype != torch.float32 for o in low):
                return "output dtype is not the input's"
            moved = [t.clone() for t in x32]
            self.inplace = tuple(self.names[k] for k in _written_inputs(
                lambda moved=moved: self.call(moved, torch), moved, torch))
            by_size = {v: s for s, v in dims.items() if v != 1}
            shape = tuple(tuple(by_size.get(n, "ONE" if n == 1 else None) for n in o.shape) for o in low)
            shapes_out = shape if shapes_out in (None, shape) else "varies"
        self.output = shapes_out[0] if shapes_out != "varies" and None not in shapes_out[0] else None
        self.outputs = () if shapes_out == "varies" else shapes_out  # every output's shape, for the backward
        # A dim's range by the largest rank it appears in, outputs included: diag of 4096 is 4096^2.  An
        # output size made of several dims (kron's A*C) gets every dim the rank-3 range.
        for shape in self.outputs if shapes_out != "varies" else ():
            rank_out = 3 if None in shape else min(max(len(shape), 1), 3)
            for s in (self.dim_max if None in shape else shape):
                if s in self.dim_max and s != "ONE":
                    self.dim_max[s] = min(self.dim_max[s], DIM_MAX[rank_out])
        return None

    def _smallest(self, torch) -> int:
        """The smallest size every dim may take: 1, or the first size at which the op runs where its fixed
        arguments need more (``kthvalue``'s k, ``gradient``'s edge_order + 1)."""
        generator = torch.Generator().manual_seed(3)
        for size in range(1, 9):
            dims = {s: (1 if m == 1 else min(m, size)) for s, m in self.dim_max.items()}
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    self.call(self._draw(dims, torch.float32, torch, generator), torch)
                return size
            except Exception:  # noqa: BLE001 - too small for the op's fixed arguments: one larger
                continue
        return 1

    def _runs(self, dims, torch, generator) -> bool:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self.call(self._draw(dims, torch.float32, torch, generator), torch)
            return True
        except Exception:  # noqa: BLE001 - the sizes break a relation the op's fixed arguments impose
            return False

    def _relate(self, torch) -> None:
        """The relations between sizes that the sample's fixed arguments impose, probed as the smallest size
        is: a dim the op cannot take at its largest while the others are smallest is either tied to the dim
        it can take it with (conv1d's kernel and input length: the two become one dim) or, where no other
        dim helps, bounded by the largest size it runs at (slice_scatter's src, by the slice's end)."""
        generator = torch.Generator().manual_seed(4)
        for s in [s for s, m in self.dim_max.items() if m > 1]:
            if s not in self.dim_max:  # tied to an earlier one
                continue
            low = {t: (1 if m == 1 else min(self.dim_min, m)) for t, m in self.dim_max.items()}
            top = {**low, s: self.dim_max[s]}
            if self._runs(top, torch, generator):
                continue
            partner = next((t for t, m in self.dim_max.items() if t != s and m > 1
                            and self._runs({**top, t: min(m, self.dim_max[s])}, torch, generator)), None)
            if partner is not None:
                self._tie(s, partner)
                continue
            runs, fails = low[s], self.dim_max[s]
            while fails - runs > 1:
                mid = (runs + fails) // 2
                runs, fails = (mid, fails) if self._runs({**low, s: mid}, torch, generator) else (runs, mid)
            self.dim_max[s] = runs

    def _tie(self, s: str, partner: str) -> None:
        """Dim ``s`` becomes ``partner`` in every shape (its range the narrower of the two)."""
        def renamed(shape):
            return None if shape is None else tuple(partner if d == s else d for d in shape)

        self.shapes = [renamed(shape) for shape in self.shapes]
        self.outputs = tuple(renamed(shape) for shape in self.outputs)
        self.output = renamed(self.output)
        self.dim_max[partner] = min(self.dim_max[partner], self.dim_max.pop(s))

    def has_backward(self, torch) -> bool:
        """Whether the declaration has a backward: grad_output is shaped by dims (an output dim of 1 that
        no input has cannot be declared), and the OpInfo supports autograd in every declared dtype."""
        op = self.op
        backward_dtypes = _dtypes_of(op, "supported_backward_dtypes", self.device)
        return bool(self.output is not None and set(self.output) <= set(self.dim_max)
                    and getattr(op, "supports_autograd", False)
                    and all(getattr(torch, d) in backward_dtypes for d in self.dtypes)
                    and self.differentiable(torch))

    def differentiable(self, torch) -> tuple:
        """The inputs autograd differentiates the op with respect to (a batch norm's running statistics
        and a loss's target are not)."""
        if not hasattr(self, "_differentiable"):
            generator = torch.Generator().manual_seed(2)
            dims = {s: (1 if m == 1 else min(m, 5 + 3 * k)) for k, (s, m) in enumerate(sorted(self.dim_max.items()))}
            xs = self._draw(dims, torch.float64, torch, generator)
            names, graded = [], set()
            for i, name in enumerate(self.names):
                try:
                    with torch.enable_grad(), warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        outs = self.call([t.clone().requires_grad_(j == i) for j, t in enumerate(xs)], torch)
                except RuntimeError:
                    continue
                if any(o.requires_grad for o in outs):
                    names.append(name)
                graded |= {k for k, o in enumerate(outs) if o.requires_grad}
            self._differentiable, self._graded = tuple(names), graded
        return self._differentiable

    def backward_outputs(self):
        """Every output autograd differentiates carries a gradient, each with its own shape (not a batch
        norm's saved mean, nor the in-place inputs' contents); where one's cannot be declared, the first."""
        graded = [k for k in range(len(self.outputs)) if k in getattr(self, "_graded", range(len(self.outputs)))]
        if len(graded) == len(self.outputs) < 2 and not self.inplace:
            return None
        shaped = all(None not in self.outputs[k] and set(self.outputs[k]) <= set(self.dim_max) for k in graded)
        return {k: self.outputs[k] for k in graded} if shaped and graded else (0,)

    def coverage(self, torch):
        """Which aten ops the op reaches, forward and backward, that the magnitude pass has no rule for
        (:func:`triton_conformance.oracles.magnitude_coverage.survey`), at small dims in float64."""
        from triton_conformance.oracles.magnitude_coverage import survey

        generator = torch.Generator().manual_seed(1)
        dims = {s: (1 if m == 1 else min(m, 5 + 3 * k)) for k, (s, m) in enumerate(sorted(self.dim_max.items()))}
        xs = dict(zip(self.names, self._draw(dims, torch.float64, torch, generator)))

        def oracle(**tensors):
            out = self.call([tensors[n] for n in self.names], torch)
            return out[0] if len(out) == 1 else out

        grads, gos = (), None
        if self.has_backward(torch):
            with torch.enable_grad():
                leaves = {n: t.clone().requires_grad_(n in self.differentiable(torch)) for n, t in xs.items()}
                outs = self.call([leaves[n] for n in self.names], torch)
            wanted = self.backward_outputs()
            positions = range(len(outs)) if wanted is None else list(wanted)
            gos = {p: torch.randn(outs[p].shape, generator=generator, dtype=torch.float64)
                   for p in positions if outs[p].requires_grad}
            grads = self.differentiable(torch) if gos else ()
        return survey(oracle, xs, {}, grads, gos)

    def register(self, torch):
        from triton_conformance import Dim, Tensor, register

        lo, hi = self.domain
        inputs = {}
        for k, (name, shape) in enumerate(zip(self.names, self.shapes)):
            extra = {}
            if k == 0 and (lo is not None or hi is not None):
                extra["value_range"] = (-8.0 if lo is None else float(lo), 8.0 if hi is None else float(hi))
            if k > 0:
                extra["same_dtype_as"] = self.names[0]
            else:
                extra["dtypes"] = self.dtypes
            inputs[name] = Tensor(shape, layouts="any", **extra)
        dims = {s: Dim(1 if m == 1 else min(self.dim_min, m), m) for s, m in self.dim_max.items()}
        backward = None
        if self.has_backward(torch):
            from triton_conformance import Backward
            grads = self.differentiable(torch)
            backward = Backward(output=self.output, outputs=self.backward_outputs(),
                                grads=() if grads == tuple(self.names) else grads)

        def launcher(**tensors):
            out = self.call([tensors[n] for n in self.names], torch)
            return out[0] if len(out) == 1 else out

        def oracle(**tensors):  # the outputs, then the contents of the inputs written in place
            out = self.call([tensors[n] for n in self.names], torch) + tuple(tensors[n] for n in self.inplace)
            return out[0] if len(out) == 1 else out

        launcher.__name__ = oracle.__name__ = subject_name(self.op)
        return register(launcher, name=subject_name(self.op), family="opdb", inputs=inputs, dims=dims, oracle=oracle,
                        backward=backward, inplace=self.inplace, module=__name__)


def declarations(device: str, wanted: list[str]):
    import torch
    for op in _import_op_db():
        if wanted and not any(w == op_label(op) or w == op.name for w in wanted):
            continue
        try:
            yield Declaration(op, torch, device)
        except Exception as exc:  # noqa: BLE001 - a sample the OpInfo cannot make here
            d = Declaration.__new__(Declaration)
            d.label, d.skip = op_label(op), f"its samples fail ({type(exc).__name__})"
            yield d
