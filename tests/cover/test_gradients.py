"""Gradient cells (issue 13 section 1): a subject that declares a backward has its gradients judged.

Pure-torch autograd Functions, so these run fast: the backward's gradients
against float64 autograd of the oracle (each with its own reduction's bound),
grad_output drawn in every layout class (stride-0 broadcast included), the
memory checks of the backward (saved inputs, grad_output, unwritten gradient
elements), determinism where claimed; and contracts without a backward get no
``grad`` cells at all.
"""

import itertools

import pytest
import torch

import triton_conformance as tc
from triton_conformance import Dim, InvalidContract, Tensor
from triton_conformance.conformance.backend import Backend
from triton_conformance.conformance.kinds import cells_for
from triton_conformance.conformance.runner import run_cell
from triton_conformance.model.config import run_config
from triton_conformance.model.contract import Backward

_ids = itertools.count()
INPUTS = {"x": Tensor(("M", "N"), dtypes=("float32",), layouts="any"),
          "weight": Tensor(("N",), dtypes=("float32",), layouts="any")}
DIMS = {"M": Dim(1, 16), "N": Dim(1, 16)}


def oracle(x, weight):
    return x * weight


class Scale(torch.autograd.Function):
    """y = x * weight (weight broadcast over rows): dx = g * w, dw = sum over rows of g * x."""

    bug = None

    @classmethod
    def forward(cls, ctx, x, weight):
        ctx.save_for_backward(x, weight)
        return x * weight

    @classmethod
    def backward(cls, ctx, g):
        x, w = ctx.saved_tensors
        if cls.bug == "grad-as-scratch" and g.stride() == g.contiguous().stride():
            g.detach().zero_()  # grad_output's buffer reused as scratch before it is read: wrong and unsafe
        if cls.bug == "contiguous-grad":
            g = torch.as_strided(g, g.shape, (g.shape[1], 1), g.storage_offset())  # assumes a contiguous g
        dw = (g * x).sum(0)
        if cls.bug == "dw-fp16":
            dw = dw.half().float()
        if cls.bug == "unwritten" and dw.numel() > 1:
            out = torch.empty_like(dw)
            out[:-1] = dw[:-1]
            dw = out
        dx = g * w
        if cls.bug == "dx-fp16":
            dx = dx.half().float()
        if cls.bug == "writes-x":
            x.detach().mul_(0.5)
        if cls.bug == "writes-grad":
            g.detach().zero_() if g.stride() == g.contiguous().stride() else None
        if cls.bug == "random" and dw.numel() > 1:
            dw = dw + torch.rand(()) * 1e-7 * dw.abs().max()
        return dx, None if cls.bug == "no-dw" else dw


def declare(bug=None, backward=("x", "weight"), **kw):
    fn = type(f"Scale_{bug}", (Scale,), {"bug": bug})
    return tc.register(fn, name=f"cover_gradients_{bug}_{next(_ids)}", inputs=INPUTS, dims=DIMS, oracle=oracle,
                       backward=backward, **kw)


def cell(subject, name):
    return run_cell(subject, name, backend=Backend(), config=run_config(profile="ci"))


def test_declaring_a_backward_names_its_gradients_and_their_reductions():
    s = declare(backward=True)
    assert s.contract.backward.grads == ("x", "weight")
    assert s.contract.backward.output == ("M", "N")
    assert s.contract.backward.deterministic is True
    assert s.contract.grad_reduction("weight", {"M": 7, "N": 3}) == 7  # dW sums over the rows
    assert s.contract.grad_reduction("x", {"M": 7, "N": 3}) == 1  # elementwise (no forward reduces)
    assert declare(backward="x").contract.backward.grads == ("x",)
    with pytest.raises(InvalidContract, match="backward.grads"):
        declare(backward=("x", "bias"))
    with pytest.raises(InvalidContract, match="backward"):
        declare(backward=42)


def test_only_a_subject_with_a_backward_gets_grad_cells():
    plain = tc.register(lambda x, weight: x * weight, name=f"cover_gradients_plain_{next(_ids)}", inputs=INPUTS,
                        dims=DIMS, oracle=oracle)
    assert not [c for c in cells_for(plain) if c.startswith("grad")]
    grads = [c for c in cells_for(declare()) if c.startswith("grad")]
    assert grads == ["grad:layout:contiguous", "grad:layout:transposed", "grad:layout:sliced", "grad:layout:padded",
                     "grad:layout:offset", "grad:layout:broadcast", "grad:dtype:float32", "grad:shape:non-pow2",
                     "grad:memory", "grad:determinism"]
    atomics = declare(backward=Backward(grads=("x", "weight"), deterministic=False))
    assert "grad:determinism" not in cells_for(atomics)
    assert cell(atomics, "grad:determinism").outcome == "skipped"


@pytest.mark.parametrize("name", ["grad:layout:contiguous", "grad:layout:transposed", "grad:layout:sliced",
                                  "grad:layout:broadcast", "grad:dtype:float32", "grad:memory",
                                  "grad:determinism"])
def test_a_correct_backward_is_honoured(name):
    result = cell(declare(), name)
    assert result.outcome == "honoured", result.message


@pytest.mark.parametrize(("bug", "name", "outcome", "finding"), [
    ("contiguous-grad", "grad:layout:transposed", "wrong", "mismatch"),
    ("dw-fp16", "grad:dtype:float32", "wrong", "mismatch"),
    ("unwritten", "grad:memory", "unsafe", "unwritten"),
    ("writes-x", "grad:memory", "unsafe", "mutated-input"),
    ("writes-grad", "grad:layout:contiguous", "unsafe", "mutated-grad-output"),
    ("no-dw", "grad:layout:contiguous", "wrong", "missing-gradient"),
    ("random", "grad:determinism", "wrong", "nondeterministic"),
])
def test_a_buggy_backward_is_caught_by_its_cell(bug, name, outcome, finding):
    subject = declare(bug)
    result = cell(subject, name)
    assert (result.outcome, result.finding) == (outcome, finding), result.message
    assert result.counterexample is not None and "grad_output" in result.counterexample.tensors
    assert f"replay({subject.module!r}, {subject.name!r}, {name!r}, example" in result.reproducer


def test_a_write_into_grad_output_outranks_the_wrong_numbers_it_causes():
    result = cell(declare("grad-as-scratch"), "grad:layout:contiguous")
    assert (result.outcome, result.finding) == ("unsafe", "mutated-grad-output"), result.message


def test_the_grad_and_autotune_finding_kinds_rank_among_the_others():
    from triton_conformance.model.outcomes import Finding, worst

    def ranked_first(*kinds):
        return worst([Finding("wrong", k, "") for k in kinds]).kind

    # An unranked kind would lose to every ranked one.
    assert ranked_first("mismatch", "mutated-grad-output") == "mutated-grad-output"  # memory before numbers
    assert ranked_first("mismatch", "missing-gradient") == "missing-gradient"  # structure before numbers,
    assert ranked_first("mismatch", "no-backward") == "no-backward"  # as bad-shape
    assert ranked_first("unwritten", "missing-gradient") == "unwritten"
    assert ranked_first("policy-violation", "config-order-dependent") == "config-order-dependent"
    assert ranked_first("mismatch", "config-order-dependent") == "mismatch"


def test_a_forward_that_detaches_has_no_backward():
    s = tc.register(lambda x, weight: (x * weight).detach(), name=f"cover_gradients_detached_{next(_ids)}",
                    inputs=INPUTS, dims=DIMS, oracle=oracle, backward=True)
    result = cell(s, "grad:layout:contiguous")
    assert (result.outcome, result.finding) == ("wrong", "no-backward"), result.message


def test_an_output_that_is_its_input_has_a_backward_and_a_detached_copy_has_none():
    # x.contiguous() of a contiguous x returns x itself: no grad_fn, and its gradient is grad_output
    inputs, dims = {"x": Tensor(("M", "N"), dtypes=("float32",))}, {"M": Dim(1, 16), "N": Dim(1, 16)}
    same = tc.register(lambda x: x.contiguous(), name=f"cover_gradients_identity_{next(_ids)}", inputs=inputs,
                       dims=dims, oracle=lambda x: x, backward=True)
    result = cell(same, "grad:layout:contiguous")
    assert result.outcome == "honoured", result.message
    copy = tc.register(lambda x: x.detach().clone(), name=f"cover_gradients_identity_{next(_ids)}", inputs=inputs,
                       dims=dims, oracle=lambda x: x, backward=True)
    result = cell(copy, "grad:layout:contiguous")
    assert (result.outcome, result.finding) == ("wrong", "no-backward"), result.message


def test_the_contiguous_grad_bug_passes_with_a_contiguous_grad_output():
    assert cell(declare("contiguous-grad"), "grad:layout:contiguous").outcome == "honoured"


def test_a_declared_overwrite_of_grad_output_is_allowed():
    s = declare("writes-grad", backward=Backward(grads=("x", "weight"), overwrites_grad_output=True))
    assert cell(s, "grad:layout:contiguous").outcome == "honoured"


def test_the_bound_of_dw_grows_with_the_rows_it_sums():
    from triton_conformance.oracles.tolerance import default_bound

    s = declare()
    few = default_bound(out_dtype="float32", reduction=s.contract.grad_reduction("weight", {"M": 1, "N": 4}))
    many = default_bound(out_dtype="float32", reduction=s.contract.grad_reduction("weight", {"M": 16, "N": 4}))
    assert many.rtol > few.rtol


def test_a_gradient_declared_in_a_lower_precision_is_judged_in_it_and_the_others_are_not():
    # dW rounded to fp16 (its terms formed in fp16, as liger's llama-mode dW forms them in the input dtype)
    # is wrong under the forward's fp32 accumulation, right once declared; dx keeps fp32's bound.
    lower = Backward(grads=("x", "weight"), accumulate={"weight": "float16"})
    assert cell(declare("dw-fp16"), "grad:dtype:float32").outcome == "wrong"
    assert cell(declare("dw-fp16", backward=lower), "grad:dtype:float32").outcome == "honoured"
    result = cell(declare("dx-fp16", backward=lower), "grad:dtype:float32")
    assert (result.outcome, result.details.get("gradient")) == ("wrong", "x"), result.message
    contract = declare(backward=Backward(grads=("x", "weight"), accumulate={"weight": "input"})).contract
    assert contract.grad_accumulation("weight", {"x": "bfloat16", "weight": "bfloat16"}) == "bfloat16"
    assert contract.grad_accumulation("x", {"x": "bfloat16", "weight": "bfloat16"}) == "float32"
    with pytest.raises(InvalidContract, match="backward.accumulate"):
        declare(backward=Backward(grads=("x", "weight"), accumulate={"bias": "float16"}))
    with pytest.raises(InvalidContract, match=r"backward.accumulate\['weight'\]"):
        declare(backward=Backward(grads=("x", "weight"), accumulate={"weight": "float8"}))


def test_an_oracle_whose_backward_raises_is_an_oracle_error():
    def no_grad_oracle(x, weight):
        return (x * weight).detach()  # no graph: autograd.grad raises

    s = tc.register(Scale, name=f"cover_gradients_bad_oracle_{next(_ids)}", inputs=INPUTS, dims=DIMS,
                    oracle=no_grad_oracle, backward=True)
    result = cell(s, "grad:layout:contiguous")
    assert (result.outcome, result.finding) == ("oracle-error", "oracle-raised"), result.message


class ScaleModule(torch.nn.Module):
    def __init__(self, N):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(N))

    def forward(self, x):
        return Scale.apply(x, self.weight)


def test_a_module_subject_gets_its_parameters_gradient():
    s = tc.register(lambda N: ScaleModule(N), name=f"cover_gradients_module_{next(_ids)}", inputs=INPUTS, dims=DIMS,
                    oracle=oracle, parameters={"weight": "weight"}, backward=True)
    assert cell(s, "grad:layout:sliced").outcome == "honoured"
    assert cell(s, "layout:contiguous").outcome == "honoured"  # the forward cells are unchanged


def test_a_grad_cell_says_which_draws_it_did_not_run():
    # A memory cap of 12 kB per example: the larger draws of M x N up to 16 x 16 (with their guards,
    # grad_output and float64 copies) are over it.  They are counted, not run, and the cell passes.
    from dataclasses import replace

    config = replace(run_config(profile="ci", max_examples=30), memory_cap=12_000)
    result = run_cell(declare(), "grad:layout:contiguous", backend=Backend(), config=config)
    assert result.outcome == "honoured", result.message
    assert result.details["over_memory_discarded"] > 0 and "over the per-example memory cap" in result.message
    assert result.examples == 30 or "ended the search" in result.message, result.message


class _PartialsFor128Programs(Scale):
    """Scale whose dW sums per-program partials in a buffer of 128 slots: program r writes slot r % 128, so
    past 128 rows a later row overwrites an earlier partial instead of adding to it (``wide_bug`` only)."""

    wide_bug = False

    @classmethod
    def backward(cls, ctx, g):
        x, w = ctx.saved_tensors
        rows = torch.arange(x.shape[0])
        kept = rows >= x.shape[0] - 128 if cls.wide_bug else torch.ones_like(rows, dtype=torch.bool)
        return g * w, (g * x)[kept].sum(0)


def test_gradient_cells_draw_the_shape_classes_a_wide_batch_included():
    wide = {"M": Dim(1, 8192), "N": Dim(1, 16)}
    buggy = tc.register(type("Wide", (_PartialsFor128Programs,), {"wide_bug": True}), name="cover_gradients_wide_bug",
                        inputs=INPUTS, dims=wide, oracle=oracle, backward=("x", "weight"))
    twin = tc.register(_PartialsFor128Programs, name="cover_gradients_wide_twin", inputs=INPUTS, dims=wide,
                       oracle=oracle, backward=("x", "weight"))
    assert {"grad:shape:non-pow2", "grad:shape:beyond-block"} <= set(cells_for(buggy))
    caught = cell(buggy, "grad:shape:beyond-block")
    assert (caught.outcome, caught.finding) == ("wrong", "mismatch"), caught.message
    assert caught.details["gradient"] == "weight" and 128 < caught.counterexample.spec["dims"]["M"] <= 4200
    assert cell(twin, "grad:shape:beyond-block").outcome == "honoured"


def test_the_long_batch_draw_crosses_any_sm_count_and_reaches_the_top_of_the_range_within_the_budget():
    from hypothesis import find, settings
    from hypothesis.errors import NoSuchExample

    from triton_conformance.strategies import specs
    from triton_conformance.strategies._internal.specs import WIDE_OUTER_FROM, in_shape_class

    c = tc.Contract(inputs=INPUTS, dims={"M": Dim(1, 4096), "N": Dim(1, 1024)}, oracle=oracle, reduces="N")
    search = settings(max_examples=400, derandomize=True, database=None, deadline=None)
    strategy = specs(c, shape="wide-outer", max_elements=4096, max_outer=16)
    low = find(strategy, lambda s: s.dims["M"] <= 256, settings=search)
    assert WIDE_OUTER_FROM <= low.dims["M"] and low.dims["M"] * low.dims["N"] <= 4096
    top = find(strategy, lambda s: s.dims["M"] > 2048 and s.dims["M"] % 16, settings=search)
    assert top.dims["N"] == 1
    assert in_shape_class("wide-outer", replace_dims(top, M=WIDE_OUTER_FROM), top)
    assert not in_shape_class("wide-outer", replace_dims(top, M=WIDE_OUTER_FROM - 1), top)
    # On CUDA (palette): each part's first size, the next multiple of 16 and one past it (few kernels to build).
    palette = specs(c, shape="wide-outer", max_elements=4096, max_outer=16, palette=True)
    assert find(palette, lambda s: s.dims["M"] > 2048, settings=search).dims["M"] in (2049, 2064, 2065)
    with pytest.raises(NoSuchExample):
        find(palette, lambda s: s.dims["M"] not in (129, 144, 145, 2049, 2064, 2065), settings=search)
    with pytest.raises(tc.InvalidArgument, match="wide-outer"):
        specs(tc.Contract(inputs=INPUTS, dims=DIMS, oracle=oracle), shape="wide-outer")


def replace_dims(spec, **dims):
    from dataclasses import replace

    return replace(spec, dims={**spec.dims, **dims})


def test_a_wide_batch_past_an_sm_count_is_reached_where_the_rows_stop_short_of_a_block():
    # The rows (M up to 4096) are not the widest dim (N up to 8192, past a block at M = 1), so only the
    # long-batch draw takes them past the 128 slots of the partial sums.
    dims = {"M": Dim(1, 4096), "N": Dim(1, 8192)}
    buggy = tc.register(type("PerSM", (_PartialsFor128Programs,), {"wide_bug": True}), name="cover_gradients_sm_bug",
                        inputs=INPUTS, dims=dims, oracle=oracle, backward=("x", "weight"))
    caught = cell(buggy, "grad:shape:beyond-block")
    assert (caught.outcome, caught.finding) == ("wrong", "mismatch"), caught.message
    assert caught.counterexample.spec["dims"]["M"] == 129  # shrunk to the first row past the 128 slots
    twin = tc.register(_PartialsFor128Programs, name="cover_gradients_sm_twin", inputs=INPUTS, dims=dims,
                       oracle=oracle, backward=("x", "weight"))
    assert cell(twin, "grad:shape:beyond-block").outcome == "honoured"
