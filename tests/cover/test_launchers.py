"""Launcher shapes real kernel libraries have (issue 12 section 2), with pure-torch subjects.

- an ``autograd.Function`` subclass, called through ``apply`` with the declared
  inputs and scalars placed by name among ``forward``'s parameters;
- an ``nn.Module``: an instance called by keyword, or a factory built per launch
  whose parameters (``parameters={"weight": "weight"}``) are drawn inputs;
- a launcher returning a tuple, judged output by output;
- a launcher writing into an argument (``inplace=("out",)``), whose final
  contents are judged, while an undeclared write is still a mutated input;
- a stochastic launcher seeded through ``torch.manual_seed`` (``Dropout(seed=None)``).
"""

import itertools

import pytest
import torch

import triton_conformance as tc
from triton_conformance import Dim, Dropout, InvalidContract, Mask, Scalar, Tensor
from triton_conformance.conformance.backend import Backend
from triton_conformance.conformance.battery.forward import run_example
from triton_conformance.conformance.expectation import EXAMPLE_HONOURED
from triton_conformance.conformance.runner import run_cell
from triton_conformance.model.config import run_config
from triton_conformance.strategies import Spec

_ids = itertools.count()
VECTOR = {"x": Tensor(("N",), dtypes=("float32",), layouts="any")}
N = {"N": Dim(1, 64)}


def declare(launcher, *, name=None, inputs=VECTOR, dims=N, oracle=lambda x: x * 2, **kw):
    return tc.register(launcher, name=f"cover_launchers_{name or launcher.__name__}_{next(_ids)}", inputs=inputs,
                       dims=dims, oracle=oracle, **kw)


def cell(subject, name):
    return run_cell(subject, name, backend=Backend(), config=run_config(profile="ci"))


def vec(n, **kw):
    return Spec(dims={"N": n}, dtypes={"x": "float32"}, **kw)


# -- autograd.Function -----------------------------------------------------

class ScaleFunction(torch.autograd.Function):
    """``forward`` takes (scale, x): the declaration names x first; apply gets them by name."""

    @staticmethod
    def forward(ctx, scale, x, shift=0.0):
        ctx.save_for_backward(x)  # what a library's Function does; no gradient is asked for
        ctx.scale = scale
        return x * scale + shift

    @staticmethod
    def backward(ctx, grad):
        return None, grad * ctx.scale, None


class SetupContextFunction(torch.autograd.Function):
    """The newer style: ``forward`` without ctx, and a separate ``setup_context``."""

    @staticmethod
    def forward(x, scale):
        return x * scale

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])


def _scaled(x, scale):
    return x * scale


@pytest.mark.parametrize("fn", [ScaleFunction, SetupContextFunction])
def test_an_autograd_function_is_called_through_apply_with_its_arguments_placed_by_name(fn):
    s = declare(fn, scalars={"scale": Scalar(0.5, 2.0)}, oracle=_scaled)
    assert s.form == "autograd.Function" and s.target is fn
    assert cell(s, "layout:mixed").outcome == "honoured"
    x = torch.arange(4.0)
    assert torch.equal(s.launcher(x=x, scale=3.0), x * 3)


def test_a_function_whose_declared_inputs_forward_does_not_take_is_invalid():
    with pytest.raises(InvalidContract, match=r"ScaleFunction\.forward.*does not accept.*'y'"):
        declare(ScaleFunction, inputs={"y": Tensor(("N",))}, scalars={"scale": Scalar(0.5, 2.0)},
                oracle=lambda y, scale: y)
    with pytest.raises(InvalidContract, match=r"ScaleFunction\.forward.*missing.*scale"):
        declare(ScaleFunction)  # forward's scale is neither declared nor defaulted


def test_a_function_forward_with_varargs_or_with_parameters_is_invalid():
    class Varargs(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *tensors):
            return tensors[0]

    with pytest.raises(InvalidContract, match=r"\*tensors, expected named positional parameters after ctx"):
        declare(Varargs)
    with pytest.raises(InvalidContract, match=r"parameters=.*only for an nn.Module"):
        declare(ScaleFunction, scalars={"scale": Scalar(0.5, 2.0)}, oracle=_scaled, parameters={"x": "w"})


def test_the_subject_decorator_takes_a_function_class():
    @tc.subject(name=f"cover_launchers_decorated_{next(_ids)}", inputs=VECTOR, dims=N,
                scalars={"scale": Scalar(0.5, 2.0)}, oracle=_scaled)
    class Decorated(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, scale):
            return x * scale

    assert Decorated.form == "autograd.Function" and cell(Decorated, "layout:contiguous").outcome == "honoured"


# -- nn.Module -------------------------------------------------------------

class RMSNorm(torch.nn.Module):
    """The shape of liger-kernel's LigerRMSNorm: a weight parameter of size (hidden,)."""

    def __init__(self, hidden_size, eps=1e-6, ignore_weight=False):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(hidden_size))
        self.eps, self.ignore_weight = eps, ignore_weight

    def forward(self, x):
        normed = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return normed if self.ignore_weight else normed * self.weight


class NormN(RMSNorm):
    def __init__(self, N, eps=1e-6):
        super().__init__(N, eps)


RMS_INPUTS = {"x": Tensor(("M", "N"), layouts="any"), "weight": Tensor(("N",), layouts="any")}
RMS_DIMS = {"M": Dim(1, 16), "N": Dim(1, 64)}


def rms_oracle(x, weight, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def declare_rms(factory, **kw):
    return declare(factory, name="rms", inputs=RMS_INPUTS, dims=RMS_DIMS, oracle=rms_oracle, reduces="N",
                   parameters={"weight": "weight"}, **kw)


def test_a_module_factory_is_built_from_the_dims_and_its_parameters_are_the_drawn_inputs():
    s = declare_rms(lambda N: RMSNorm(N))
    assert s.form == "nn.Module"
    for name in ("layout:mixed", "memory", "shape:non-pow2"):
        assert cell(s, name).outcome == "honoured", name


def test_a_module_that_ignores_its_drawn_parameter_is_caught():
    result = cell(declare_rms(lambda N: RMSNorm(N, ignore_weight=True)), "layout:contiguous")
    assert (result.outcome, result.finding) == ("wrong", "mismatch"), result.message


def test_a_module_class_takes_its_init_parameters_from_dims_and_scalars_by_name():
    class Norm(RMSNorm):
        def __init__(self, N, eps):
            super().__init__(N, eps)

    s = declare(Norm, name="rms_class", inputs=RMS_INPUTS, dims=RMS_DIMS, reduces="N",
                scalars={"eps": Scalar(1e-6, 1e-3)}, oracle=rms_oracle, parameters={"weight": "weight"})
    assert cell(s, "layout:contiguous").outcome == "honoured"


def test_a_module_instance_is_called_by_keyword_and_its_parameters_replaced():
    norm = RMSNorm(8)
    s = declare(norm, name="rms_instance", inputs=RMS_INPUTS, dims={"M": Dim(1, 16), "N": Dim(8, 8)},
                oracle=rms_oracle, reduces="N", parameters={"weight": "weight"})
    assert s.target is norm and cell(s, "layout:mixed").outcome == "honoured"
    plain = declare(torch.nn.ReLU(), name="relu_instance", inputs={"input": Tensor(("N",))}, oracle=torch.relu)
    assert plain.form == "nn.Module" and cell(plain, "layout:contiguous").outcome == "honoured"


def test_a_module_that_changes_its_drawn_parameter_mutates_an_input():
    class Drifting(RMSNorm):
        def forward(self, x):
            out = super().forward(x)
            self.weight.data.mul_(0.5)  # a running update
            return out

    result = cell(declare_rms(lambda N: Drifting(N)), "layout:contiguous")
    assert (result.outcome, result.finding) == ("unsafe", "mutated-input"), result.message
    assert "'weight'" in result.message


def test_module_declarations_are_checked():
    with pytest.raises(InvalidContract, match=r"parameters\['weight'\]='scale', expected the name of a parameter"):
        declare(RMSNorm(8), name="bad_path", inputs=RMS_INPUTS, dims={"M": Dim(1, 4), "N": Dim(8, 8)},
                oracle=rms_oracle, parameters={"weight": "scale"})
    with pytest.raises(InvalidContract, match=r"parameters\['w'\], expected a declared Tensor input"):
        declare_rms(lambda N: RMSNorm(N), ) if False else declare(
            lambda N: RMSNorm(N), name="bad_input", inputs=RMS_INPUTS, dims=RMS_DIMS, oracle=rms_oracle,
            parameters={"w": "weight"})
    with pytest.raises(InvalidContract, match=r"factory's parameter 'hidden' is neither a declared dim nor a scalar"):
        declare_rms(lambda hidden: RMSNorm(hidden))
    with pytest.raises(InvalidContract, match=r"forward.*does not accept"):
        declare(NormN, name="bad_forward", inputs={**RMS_INPUTS, "y": Tensor(("N",))}, dims=RMS_DIMS,
                oracle=lambda x, weight, y: x, parameters={"weight": "weight"})
    with pytest.raises(InvalidContract, match=r"a lambda needs name="):
        tc.register(lambda x: x, inputs=VECTOR, dims=N, oracle=lambda x: x)


# -- tuples ----------------------------------------------------------------

def _pair_oracle(x):
    return x * 2, x + 1


def test_a_tuple_of_outputs_is_judged_against_the_oracles_tuple():
    assert cell(declare(lambda x: (x * 2, x + 1), name="pair", oracle=_pair_oracle), "layout:mixed").outcome \
        == "honoured"
    result = cell(declare(lambda x: (x * 2, x + 1.01), name="pair_bad", oracle=_pair_oracle), "layout:contiguous")
    assert (result.outcome, result.finding) == ("wrong", "mismatch") and "output[1]" in result.message
    result = cell(declare(lambda x: (x * 2,), name="pair_short", oracle=_pair_oracle), "layout:contiguous")
    assert (result.outcome, result.finding) == ("wrong", "bad-output")


# -- in place --------------------------------------------------------------

def double_(x):
    x.mul_(2)


def double_all_but_the_tail_(x):
    n = x.shape[0]
    x[: max(n - 1, n // 2 * 2 - 0) if n % 2 else n].mul_(2)  # an odd length keeps its last element


def test_a_declared_in_place_input_is_judged_on_its_final_contents():
    s = declare(double_, inplace=("x",))
    assert s.contract.inplace == ("x",)
    for name in ("layout:mixed", "memory", "shape:non-pow2"):
        assert cell(s, name).outcome == "honoured", name
    result = cell(declare(double_all_but_the_tail_, inplace=("x",)), "shape:non-pow2")
    assert (result.outcome, result.finding) == ("wrong", "mismatch"), result.message


def test_returning_the_in_place_input_and_returning_more_both_work():
    def returns_it(x):
        return x.mul_(2)

    def returns_the_old_one_too(x):
        old = x.clone()
        x.mul_(2)
        return old + 1

    assert cell(declare(returns_it, inplace="x"), "layout:contiguous").outcome == "honoured"
    s = declare(returns_the_old_one_too, inplace="x", oracle=lambda x: (x + 1, x * 2))
    assert cell(s, "layout:contiguous").outcome == "honoured"


def test_an_undeclared_write_is_still_a_mutated_input():
    result = cell(declare(lambda x: x.mul_(2), name="undeclared"), "layout:contiguous")
    assert (result.outcome, result.finding) == ("unsafe", "mutated-input")
    two = {"x": Tensor(("N",)), "y": Tensor(("N",))}

    def writes_both(x, y):
        y.zero_()
        x.mul_(2)

    found = run_example(declare(writes_both, inputs=two, inplace=("x",), oracle=lambda x, y: x * 2),
                        Spec(dims={"N": 5}, dtypes={"x": "float32", "y": "float32"}, layouts={}), Backend())
    assert (found.outcome, found.kind, found.details["inputs"]) == ("unsafe", "mutated-input", ["y"])


def test_a_write_around_an_in_place_inputs_elements_is_out_of_bounds():
    def through_the_gaps(x):
        x.as_strided((x.shape[0] * 2,), (1,), x.storage_offset())[1::2].zero_()  # x's gaps
        x.mul_(2)

    from triton_conformance.strategies import Layout

    found = run_example(declare(through_the_gaps, inplace=("x",)), vec(5, layouts={"x": Layout("sliced", steps=(2,))}),
                        Backend())
    assert (found.outcome, found.kind) == ("unsafe", "oob-write"), found
    assert run_example(declare(double_, inplace=("x",)), vec(5, layouts={"x": Layout("sliced", steps=(2,))}),
                       Backend()) == EXAMPLE_HONOURED


def test_in_place_declarations_are_checked():
    with pytest.raises(InvalidContract, match=r"inplace='out', expected names of Tensor inputs"):
        declare(double_, inplace=("out",))
    with pytest.raises(InvalidContract, match=r"inplace='m', expected names of Tensor inputs"):
        declare(lambda x, m: None, name="mask", inputs={"x": Tensor(("N",)), "m": Mask(("N",))},
                oracle=lambda x, m: x, inplace=("m",))


# -- torch.manual_seed -----------------------------------------------------

def torch_dropout(x, p):
    return torch.nn.functional.dropout(x, p)


_FIXED = torch.Generator().manual_seed(1234)


def fixed_generator_dropout(x, p):
    """Its own generator, seeded once at import: torch.manual_seed does not reach it."""
    keep = torch.rand(x.shape, generator=torch.Generator().manual_seed(1234)) >= p
    return torch.where(keep, x / (1 - p), 0.0) if p < 1 else torch.zeros_like(x)


def shared_generator_dropout(x, p):
    """One generator for every call: the same seed never gives the same mask twice."""
    keep = torch.rand(x.shape, generator=_FIXED) >= p
    return torch.where(keep, x / (1 - p), 0.0) if p < 1 else torch.zeros_like(x)


def declare_dropout(launcher):
    return declare(launcher, inputs={"x": Tensor(("M", "N"), layouts="any")},
                   dims={"M": Dim(0, 1 << 20), "N": Dim(0, 1 << 20)}, scalars={"p": Scalar(0.0, 1.0)},
                   model=Dropout(p="p", seed=None), oracle=lambda x, p: x, deterministic=False,
                   max_elements=1 << 22)


def test_a_torch_seeded_dropout_passes_every_stochastic_and_ordinary_cell():
    s = declare_dropout(torch_dropout)
    assert "seed" not in s.contract.scalars and s.contract.model.scalar_names() == ("p",)
    from triton_conformance.conformance.kinds import cells_for

    cells = [c for c in cells_for(s) if c.startswith("stochastic:")]
    assert len(cells) == 6
    for name in cells + ["layout:mixed", "memory"]:
        result = cell(s, name)
        assert result.outcome == "honoured", (name, result.message)


def test_the_harness_seeds_torch_before_each_launch():
    seeds = []

    def records(x, p):
        seeds.append(torch.initial_seed())
        return torch_dropout(x, p)

    spec = Spec(dims={"M": 3, "N": 5}, dtypes={"x": "float32"}, layouts={}, scalars={"p": 0.5}, seed=7)
    assert run_example(declare_dropout(records), spec, Backend()) == EXAMPLE_HONOURED
    assert seeds[:2] == [7, 7]


def test_a_dropout_that_ignores_torch_manual_seed_is_caught():
    result = cell(declare_dropout(fixed_generator_dropout), "stochastic:seeds")
    assert (result.outcome, result.finding) == ("wrong", "seed-dependence"), result.message


def test_a_dropout_on_a_shared_generator_is_irreproducible():
    s = declare_dropout(shared_generator_dropout)
    result = cell(s, "stochastic:reproducibility")
    assert (result.outcome, result.finding) == ("wrong", "irreproducible"), result.message
    # In an ordinary cell: the two calls of one example (same seed) differ, and differ again when repeated.
    spec = Spec(dims={"M": 64, "N": 64}, dtypes={"x": "float32"}, layouts={}, scalars={"p": 0.5})
    found = run_example(s, spec, Backend())
    assert (found.outcome, found.kind) == ("wrong", "nondeterministic"), found


def test_a_seed_named_by_the_model_must_still_be_declared():
    with pytest.raises(InvalidContract, match=r"its argument 'seed' declared in scalars"):
        declare(torch_dropout, scalars={"p": Scalar(0.0, 1.0)}, model=Dropout(p="p"), oracle=lambda x, p: x,
                deterministic=False)
    with pytest.raises(InvalidContract, match=r"seed=3, expected the name of a launcher argument \(or None"):
        Dropout(seed=3)
