"""Stochastic models and cells, driven by pure-torch dropout "kernels" so each runs in milliseconds.

The correct torch dropout must pass every stochastic cell; each planted bug
must be caught by the cell meant for it.  The Triton kernel and its zoo are
exercised in tests/quality.
"""

import math

import pytest
import torch

from triton_conformance import Dim, Dropout, InvalidContract, Scalar, Tensor, register
from triton_conformance.conformance.kinds import catalogue, cells_for, stochastic_plan
from triton_conformance.conformance.runner import run_cell
from triton_conformance.conformance.replay import replay
from triton_conformance.conformance.search.policy import SearchPolicy
from triton_conformance.model.config import run_config
from triton_conformance.conformance.kinds.stochastic.checks import check_stochastic_output
from triton_conformance.model.outcomes import Finding
from triton_conformance.conformance.kinds.stochastic.designs import lag_pairs
from triton_conformance.conformance.kinds.stochastic.plan import AGREEMENT_DEVIATION, RATE_DEVIATION
from triton_conformance.oracles.planning import agreement_expected, binomial_power
from triton_conformance.oracles.statistics import binomial_homogeneity
from triton_conformance.oracles.tolerance import default_bound

MAX_SEED = 2**31 - 1


def _uniform(x, seed):
    return torch.rand(x.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def torch_dropout(x, p, seed, *, bug=None):
    """Dropout of relu(x) in torch: keep where a seeded uniform is >= p.  ``bug`` plants one mistake."""
    if not 0 <= p < 1:
        raise ValueError(f"p={p!r}, expected 0 <= p < 1")
    x64 = x.to(torch.float64)
    r = _uniform(x, 42 if bug == "seed-ignored" else seed)
    flat = r.reshape(-1)
    if bug == "block-local":  # every block of 1024 shares the first block's numbers
        flat = flat[torch.arange(flat.numel()) % 1024]
    if bug == "rows-repeat":  # rows repeat every 32
        rows = r.reshape(-1, x.shape[-1])
        flat = rows[torch.arange(rows.shape[0]) % 32].reshape(-1)
    if bug == "value-keyed":  # a hash of the value, not of the position
        flat = torch.frac(torch.sin(x64.reshape(-1) * 12.9898 + seed) * 43758.5453).abs()
    if bug == "position-rate":  # the first 64 positions of each block of 1024 drop twice as often
        pos = torch.arange(flat.numel()) % 1024
        flat = torch.where(pos < 64, flat / 2, flat)
    r = flat.reshape(x.shape)
    keep = r < p if bug == "inverted" else r >= p
    scale = (1 - p) if bug == "scale" else 1 / (1 - p)
    return torch.where(keep, torch.relu(x64) * scale, 0.0).to(x.dtype)


def declare(bug=None, name=None, **overrides):
    decl = dict(
        inputs={"x": Tensor(("M", "N"), dtypes=("float32",), layouts="any")},
        dims={"M": Dim(0, 1 << 20), "N": Dim(0, 1 << 20)},
        scalars={"p": Scalar(0.0, 0.999), "seed": Scalar(0, MAX_SEED, kind="int")},
        oracle=lambda x, p, seed: torch.relu(x),
        model=Dropout(p="p", seed="seed"),
        deterministic=False,
        name=name or f"torch_dropout_{(bug or 'ok').replace('-', '_')}",
        family="torch_dropout",
    )
    decl.update(overrides)

    def launcher(x, p, seed):
        return torch_dropout(x, p, seed, bug=bug)

    return register(launcher, **decl)


# %% The model --------------------------------------------------------------


def test_dropout_model_classifies_dropped_kept_and_impossible_values():
    model = Dropout()
    ref = torch.tensor([2.0, 2.0, 0.0, 0.0, 1.0], dtype=torch.float64)
    out = torch.tensor([0.0, 4.0, 0.0, 3.0, 1.5])  # p = 0.5: kept = 2 * ref
    bound = default_bound(out_dtype="float32", scale=4.0)
    ev = model.classify(out, ref, {"p": 0.5, "seed": 0}, bound)
    assert ev.event.tolist() == [True, False, False, False, False]
    assert ev.observable.tolist() == [True, True, False, False, True]
    # a nonzero where f(x) = 0, and 1.5 where only 0 or 2 are allowed
    assert ev.invalid.tolist() == [False, False, False, True, True]
    assert ev.counts() == (1, 3)


@pytest.mark.parametrize(("field", "value", "expected"), [
    ("alpha", 0.0, "alpha=0.0"), ("alpha", 1e-6 * 1e7, "alpha=10.0"), ("seed", "not a name", "seed='not a name'"),
])
def test_model_declarations_are_validated(field, value, expected):
    with pytest.raises(InvalidContract, match=expected.replace("(", r"\(").replace(")", r"\)")):
        Dropout(**{field: value})


def test_dropout_levels_must_be_probabilities():
    with pytest.raises(InvalidContract, match="probabilities"):
        Dropout(levels=(0.5, 1.5))


def test_contract_requires_the_models_arguments_as_scalars():
    with pytest.raises(InvalidContract, match="'seed' declared in scalars"):
        declare(scalars={"p": Scalar(0.0, 0.999)}, oracle=lambda x, **_: torch.relu(x))
    with pytest.raises(InvalidContract, match="int Scalar"):
        declare(scalars={"p": Scalar(0.0, 0.999), "seed": Scalar(0.0, 10.0)})
    with pytest.raises(InvalidContract, match="StochasticModel"):
        declare(model="dropout")


def test_a_stochastic_subject_gets_the_stochastic_cells_and_no_determinism_cell():
    cells = cells_for(declare())
    assert [c for c in cells if c.startswith("stochastic:")] == [
        "stochastic:rate", "stochastic:values", "stochastic:edges", "stochastic:reproducibility",
        "stochastic:seeds", "stochastic:independence"]
    assert "determinism" not in cells and "layout:transposed" in cells
    stochastic = [c for c in cells if c.startswith("stochastic:")]
    assert sorted(stochastic, key=catalogue().sort_key) == stochastic
    key = catalogue().sort_key
    assert key("memory") < key("stochastic:rate") < key("stochastic:independence")


# %% The plan ---------------------------------------------------------------


def test_plan_splits_alpha_over_every_check_and_sizes_have_the_stated_power():
    plan = stochastic_plan(declare())
    assert plan.alpha_check * plan.checks == pytest.approx(plan.alpha_run)
    assert plan.checks > 150  # the ordinary cells' per-example rate tests are counted
    for q, n in plan.rate_trials.items():
        for alt in (q - RATE_DEVIATION, q + RATE_DEVIATION):
            if 0 <= alt <= 1:
                assert binomial_power(n, q, alt, plan.alpha_check) >= 0.99, (q, alt, n)
    half = agreement_expected(0.5)
    assert binomial_power(plan.agreement_pairs, half, half + AGREEMENT_DEVIATION, plan.alpha_check) >= 0.99


def test_lag_pairs_are_disjoint_and_count_agreements():
    events = torch.tensor([1, 0, 1, 0, 1, 1, 1, 1], dtype=torch.bool)
    observable = torch.ones(8, dtype=torch.bool)
    agree, pairs = lag_pairs(events, observable, 2)  # pairs (0,2) (1,3) (4,6) (5,7)
    assert (agree, pairs) == (4, 4)
    agree, pairs = lag_pairs(events, observable, 1)  # (0,1) (2,3) (4,5) (6,7)
    assert (agree, pairs) == (2, 4)


def test_binomial_homogeneity_accepts_equal_rates_and_rejects_one_odd_group():
    g = torch.Generator().manual_seed(3)
    trials = [400] * 20
    events = [int(torch.binomial(torch.tensor(400.0), torch.tensor(0.5), generator=g)) for _ in trials]
    assert binomial_homogeneity(events, trials, 0.5).p_value > 1e-4
    events[7] = 300  # one group at rate 0.75
    assert binomial_homogeneity(events, trials, 0.5).p_value < 1e-12
    with pytest.raises(ValueError, match="expected >= 5"):
        binomial_homogeneity([1, 2], [4, 4], 0.5)


# %% The cells, on torch dropouts -------------------------------------------

# Not derandomized: each run's seed draws its designs' seeds, mixed with the cell's name.
def fresh_seed(seed: int):
    return run_config(profile="dev", seed=seed)
CELLS = ("rate", "values", "edges", "reproducibility", "seeds", "independence")


@pytest.mark.parametrize("cell", CELLS)
def test_correct_dropout_passes_every_stochastic_cell(cell):
    result = run_cell(declare(), f"stochastic:{cell}", config=fresh_seed(11))
    assert result.outcome == "honoured", result.message


@pytest.mark.parametrize(("bug", "cell", "finding"), [
    ("inverted", "rate", "rate-mismatch"),
    ("scale", "values", "invalid-value"),
    ("inverted", "edges", "edge"),
    ("seed-ignored", "seeds", "seed-dependence"),
    ("block-local", "independence", "not-independent"),
    ("rows-repeat", "independence", "not-independent"),
    ("value-keyed", "independence", "not-independent"),
    ("position-rate", "independence", "not-independent"),
])
def test_each_planted_bug_is_caught_by_its_cell(bug, cell, finding):
    result = run_cell(declare(bug), f"stochastic:{cell}", config=fresh_seed(5))
    assert (result.outcome, result.finding) == ("wrong", finding), result.message
    seed = result.counterexample["seed"]
    assert seed == SearchPolicy.of(fresh_seed(5)).seed_for(result.subject, result.cell)
    assert f"seed={seed}" in result.message
    assert f"replay({__name__!r}, {result.subject!r}, {result.cell!r}, example, " in result.reproducer
    assert f"example = {seed}" in result.reproducer
    if cell in ("rate", "seeds", "independence"):
        rejected = [t for t in result.details["tests"] if t["rejected"]]
        assert rejected and all(t["p_value"] < result.details["alpha_check"] for t in rejected)
        assert "p-value=" in result.message and "expected" in result.message


def test_a_clock_seeded_kernel_is_irreproducible():
    calls = iter(range(10**6))
    subject = declare(name="torch_dropout_clock")
    object.__setattr__(subject, "launcher", lambda x, p, seed: torch_dropout(x, p, seed + next(calls)))
    result = run_cell(subject, "stochastic:reproducibility", config=fresh_seed(1))
    assert (result.outcome, result.finding) == ("wrong", "irreproducible"), result.message


def test_p_equal_one_must_be_rejected_cleanly_when_the_contract_excludes_it():
    def accepts_one(x, p, seed):
        return torch.zeros_like(x) if p == 1 else torch_dropout(x, p, seed)

    subject = declare(name="torch_dropout_accepts_one")
    object.__setattr__(subject, "launcher", accepts_one)
    result = run_cell(subject, "stochastic:edges", config=fresh_seed(1))
    assert (result.outcome, result.finding) == ("wrong", "accepted-out-of-contract"), result.message
    admitting = declare(name="torch_dropout_p_closed", scalars={"p": Scalar(0.0, 1.0),
                                                                "seed": Scalar(0, MAX_SEED, kind="int")})
    object.__setattr__(admitting, "launcher", accepts_one)
    assert run_cell(admitting, "stochastic:edges", config=fresh_seed(1)).outcome == "honoured"


def test_replay_reruns_the_cell_and_raises_while_it_fails(capsys):
    declare("seed-ignored", name="torch_dropout_replayed")
    with pytest.raises(AssertionError, match="seed-dependence"):
        replay(__name__, "torch_dropout_replayed", "stochastic:seeds", 3)
    assert "REJECT agreement of the masks" in capsys.readouterr().out


def test_ordinary_cells_check_each_example_against_the_model():
    subject = declare()
    x = torch.rand(4000, dtype=torch.float64) + 0.5
    ref = x.clone()
    bound = default_bound(out_dtype="float32", scale=4.0)
    alpha = stochastic_plan(subject).alpha_check
    good = torch_dropout(x.float(), 0.3, 7)
    assert check_stochastic_output(subject, good, ref, {"p": 0.3, "seed": 7}, bound, alpha) is None
    inverted = torch_dropout(x.float(), 0.3, 7, bug="inverted")
    found = check_stochastic_output(subject, inverted, ref, {"p": 0.3, "seed": 7}, bound, alpha)
    assert isinstance(found, Finding) and found.kind == "rate-mismatch" and found.details["p_value"] < 1e-100
    scaled = torch_dropout(x.float(), 0.3, 7, bug="scale")
    assert check_stochastic_output(subject, scaled, ref, {"p": 0.3, "seed": 7}, bound, alpha).kind == "invalid-value"


def test_the_correct_kernels_p_values_stay_far_above_alpha_over_seeds():
    # A sanity check of the null distribution; bench/stochastic_flakiness.py measures it at scale.
    subject = declare()
    smallest = min(min(t["p_value"] for t in run_cell(subject, "stochastic:rate", config=fresh_seed(s))
                       .details["tests"]) for s in range(5))
    assert smallest > stochastic_plan(subject).alpha_check
    assert math.isfinite(smallest)


def test_a_mask_that_depends_on_the_sign_is_caught_when_f_keeps_negatives_visible():
    def sign_biased(x, p, seed):  # plain dropout (f = identity) that drops negatives less often
        r = _uniform(x, seed)
        r = torch.where(x < 0, 0.5 + r / 2, r)
        return torch.where(r >= p, x.to(torch.float64) / (1 - p), 0.0).to(x.dtype)

    def plain(x, p, seed):
        return torch.where(_uniform(x, seed) >= p, x.to(torch.float64) / (1 - p), 0.0).to(x.dtype)

    identity = {"oracle": lambda x, p, seed: x.clone(), "family": "torch_plain_dropout"}
    good = declare(name="torch_plain_dropout", **identity)
    object.__setattr__(good, "launcher", plain)
    assert run_cell(good, "stochastic:independence", config=fresh_seed(2)).outcome == "honoured"
    bad = declare(name="torch_plain_dropout_sign_biased", **identity)
    object.__setattr__(bad, "launcher", sign_biased)
    result = run_cell(bad, "stochastic:independence", config=fresh_seed(2))
    assert (result.outcome, result.finding) == ("wrong", "not-independent")
    assert any(t["rejected"] and "value" in t["description"] for t in result.details["tests"])


# %% A model whose probabilities come from the data ---------------------------


def test_stochastic_rounding_model_finds_the_grid_neighbours_and_the_chance_of_rounding_up():
    from triton_conformance import StochasticRounding

    model = StochasticRounding(grid="bfloat16")
    ref = torch.tensor([1.0, 1.0 + 2**-9, -(1.0 + 2**-8), 3e-3], dtype=torch.float64)
    down, up = model.neighbours(ref)
    assert down.tolist()[:3] == [1.0, 1.0, 1.0] and up.tolist()[:3] == [1.0, 1.0 + 2**-7, 1.0 + 2**-7]
    out = torch.tensor([1.0, 1.0 + 2**-7, -1.0, 3e-3])  # the last is not on the bfloat16 grid
    ev = model.classify(out, ref, {}, None)
    assert ev.observable.tolist() == [False, True, True, True]
    assert ev.event.tolist() == [False, True, False, False]
    assert ev.probability[1:3].tolist() == [0.25, 0.5]
    assert ev.invalid.tolist() == [False, False, False, True]
    with pytest.raises(InvalidContract, match="grid='int8'"):
        StochasticRounding(grid="int8")


def test_data_driven_probabilities_get_poisson_binomial_tests_that_catch_a_biased_rounder():
    from triton_conformance import StochasticRounding

    def rounder(x, seed, *, bias=0.0):
        model = StochasticRounding()
        ref = x.to(torch.float64)
        down, up = model.neighbours(ref)
        p_up = ((ref.abs() - down) / torch.where(up > down, up - down, 1.0)).clamp(0, 1)
        go_up = _uniform(x, seed) < (p_up + bias).clamp(0, 1)
        return (torch.sign(ref) * torch.where(go_up, up, down)).to(torch.float32)

    decl = dict(inputs={"x": Tensor(("M", "N"), dtypes=("float32",), layouts="any")},
                dims={"M": Dim(0, 1 << 20), "N": Dim(0, 1 << 20)},
                scalars={"seed": Scalar(0, MAX_SEED, kind="int")}, oracle=lambda x, seed: x.clone(),
                model=StochasticRounding(), deterministic=False, family="torch_rounding")
    good = register(lambda x, seed: rounder(x, seed), name="torch_rounding", **decl)
    assert "stochastic:edges" not in cells_for(good)
    for cell in ("rate", "seeds", "independence"):
        result = run_cell(good, f"stochastic:{cell}", config=fresh_seed(4))
        assert result.outcome == "honoured", result.message
    assert result.details["tests"][0]["test"] == "poisson-binomial"
    biased = register(lambda x, seed: rounder(x, seed, bias=0.02), name="torch_rounding_biased", **decl)
    result = run_cell(biased, "stochastic:rate", config=fresh_seed(4))
    assert (result.outcome, result.finding) == ("wrong", "rate-mismatch"), result.message
