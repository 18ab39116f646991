"""The autotune kind: each surviving config of an @triton.autotune kernel is a cell, and the tuning's
side effects (the benchmark's runs, their order, the key's cache) are judged."""

import functools
import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # before any @triton.jit below is defined

import pytest  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from triton_conformance import Dim, InvalidContract, Tensor, register, subject  # noqa: E402
from triton_conformance.conformance.kinds.autotune.discovery import autotuned, reveal, tuners_for  # noqa: E402
from triton_conformance.conformance.kinds.autotune.tuning import Tuning, config_name  # noqa: E402
from triton_conformance.conformance.kinds import cells_for, kind_of  # noqa: E402
from triton_conformance.conformance.replay import replay  # noqa: E402
from triton_conformance.conformance.observe import Observer  # noqa: E402
from triton_conformance.conformance.runner import run_cell  # noqa: E402
from triton_conformance.errors import InvalidArgument  # noqa: E402
from triton_conformance.model.config import run_config  # noqa: E402
from triton_conformance.model.spec import Spec  # noqa: E402

pytestmark = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="runs kernels on the interpreter")

CI = run_config(profile="ci")
CONFIGS = [triton.Config({"BLOCK": b}, num_warps=w) for b, w in ((16, 1), (32, 2), (64, 4), (128, 4))]
VEC = dict(inputs={"x": Tensor(("N",), dtypes=("float32",))}, dims={"N": Dim(1, 200)}, oracle=lambda x: x * 2)


def keep_wide_enough(configs, named_args, **kwargs):
    kept = [c for c in configs if c.kwargs["BLOCK"] >= named_args["n"]]
    return kept or configs[-1:]


@triton.jit
def _double_block(out_ptr, x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


# One program holds the whole vector: the pruning keeps blocks at least n wide.
@triton.autotune(configs=CONFIGS, key=["n"], prune_configs_by={"early_config_prune": keep_wide_enough})
@triton.jit
def double_one_block(out_ptr, x_ptr, n, BLOCK: tl.constexpr):
    _double_block(out_ptr, x_ptr, n, BLOCK)


@triton.autotune(configs=CONFIGS, key=["m"], prune_configs_by={"early_config_prune": keep_wide_enough})
@triton.jit
def double_one_block_keyed_on_m(out_ptr, x_ptr, n, m, BLOCK: tl.constexpr):  # m: an argument that is not n
    _double_block(out_ptr, x_ptr, n, BLOCK)


@triton.autotune(configs=CONFIGS[:1], key=["n"])
@triton.jit
def double_one_config(out_ptr, x_ptr, n, BLOCK: tl.constexpr):
    _double_block(out_ptr, x_ptr, n, BLOCK)


def _one_block(kernel, x, *extra):
    out = torch.empty_like(x)
    kernel[(1,)](out, x, x.shape[0], *extra)
    return out


@subject(**VEC, family="cover_autotune_direct")
def cover_autotune_direct(x):
    out = torch.empty_like(x)
    double_one_block[(1,)](out, x, x.shape[0])
    return out


def library_double(x):
    """A library entry point that launches the kernel: the subject calls this, not the kernel."""
    return _one_block(double_one_block, x)


@subject(**VEC, family="cover_autotune_helper")
def cover_autotune_helper(x):
    return library_double(x)


KERNELS = {"double": double_one_block}


@subject(**VEC, family="cover_autotune_declared", autotuned=double_one_block)
def cover_autotune_declared(x):
    return _one_block(KERNELS["double"], x)  # looked up at run time: not in the code, so declared


# As libraries bind a kernel once at definition: a default argument, not a global the code names.
@subject(**VEC, family="cover_autotune_default_argument")
def cover_autotune_default_argument(x, _kernel=double_one_block):
    return _one_block(_kernel, x)


def _launch_keyword_default(x, *, kernel=double_one_block):
    return _one_block(kernel, x)


@subject(**VEC, family="cover_autotune_keyword_default")
def cover_autotune_keyword_default(x):
    return _launch_keyword_default(x)


# %% A library's layers, as fla-core stacks them: a public function under functools.wraps decorators
# (@input_guard over @dispatch over torch.compiler.disable), an autograd Function class, its decorated
# forward, a helper that launches the kernel: six layers, deeper than reveal()'s four calls unless a
# decorator and a class cost nothing.

def _passthrough(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)
    return wrapper


def _library_forward(x):
    return _one_block(double_one_block, x)


class LibraryDoubleFunction(torch.autograd.Function):
    @staticmethod
    @_passthrough
    def forward(ctx, x):
        return _library_forward(x)


@_passthrough
@_passthrough
@_passthrough
def library_entry(x):
    return LibraryDoubleFunction.apply(x)


@subject(**VEC, family="cover_autotune_layered")
def cover_autotune_layered(x):
    return library_entry(x)


@subject(**VEC, family="cover_autotune_key")
def cover_autotune_key_omits_n(x):
    return _one_block(double_one_block_keyed_on_m, x, 1)


@subject(**VEC, family="cover_autotune_one_config")
def cover_autotune_one_config(x):
    return _one_block(double_one_config, x)


double_five_configs = triton.autotune(configs=CONFIGS + [triton.Config({"BLOCK": 256}, num_warps=8)], key=["n"],
                                      prune_configs_by={"early_config_prune": keep_wide_enough})(_double_block)


@subject(**{**VEC, "dims": {"N": Dim(1, 128)}}, family="cover_autotune_unreached")
def cover_autotune_unreached(x):
    if x.shape[0] > 10**6:  # never, inside the contract (N <= 128): found in the code, never launched
        return _one_block(double_five_configs, x)
    return _one_block(double_one_block, x)


# %% The benchmark: an atomic accumulation into an in-place output, with and without reset_to_zero.

SUM_CONFIGS = [triton.Config({"BLOCK": b}) for b in (16, 32, 64, 128)]


@triton.jit
def _sum_body(out_ptr, x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(out_ptr, tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0), axis=0))


@triton.autotune(configs=SUM_CONFIGS, key=["n"])
@triton.jit
def sum_no_reset(out_ptr, x_ptr, n, BLOCK: tl.constexpr):
    _sum_body(out_ptr, x_ptr, n, BLOCK)


@triton.autotune(configs=SUM_CONFIGS, key=["n"], reset_to_zero=["out_ptr"])
@triton.jit
def sum_reset(out_ptr, x_ptr, n, BLOCK: tl.constexpr):
    _sum_body(out_ptr, x_ptr, n, BLOCK)


SUM = dict(inputs={"x": Tensor(("N",), dtypes=("float32",)), "out": Tensor(("ONE",), dtypes=("float32",))},
           dims={"N": Dim(1, 200), "ONE": Dim(1, 1)}, oracle=lambda x, out: x.sum().reshape(1), inplace=("out",),
           deterministic=False, reduces="N")


def _sum(kernel, x, out):
    out.zero_()
    kernel[lambda meta: (triton.cdiv(x.shape[0], meta["BLOCK"]),)](out, x, x.shape[0])


@subject(**SUM, family="cover_autotune_sum")
def cover_autotune_sum_no_reset(x, out):
    _sum(sum_no_reset, x, out)


@subject(**SUM, family="cover_autotune_sum")
def cover_autotune_sum_reset(x, out):
    _sum(sum_reset, x, out)


# %% Order: a lazily sized workspace that the first config to run sets (and the launcher clears).

WORKSPACE = {}


@triton.autotune(configs=SUM_CONFIGS, key=["n"])
@triton.jit
def add_first_block(out_ptr, x_ptr, ws_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    first = tl.atomic_cas(ws_ptr, 0, BLOCK)  # the first config to run claims the workspace
    first = tl.where(first == 0, BLOCK, first)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, x * 2 + (first - 16), mask=offs < n)  # right only if BLOCK=16 ran first


@subject(**VEC, family="cover_autotune_order")
def cover_autotune_order_dependent(x):
    ws = WORKSPACE.setdefault("ws", torch.zeros(1, dtype=torch.int32))
    ws.zero_()
    out = torch.empty_like(x)
    add_first_block[lambda meta: (triton.cdiv(x.shape[0], meta["BLOCK"]),)](out, x, ws, x.shape[0])
    return out


# %% Order, finer: the first config to run moves a float64 output by one ulp (lost if compared in fp32).

VEC64 = dict(inputs={"x": Tensor(("N",), dtypes=("float64",))}, dims={"N": Dim(1, 200)}, oracle=lambda x: x * 2)


@triton.autotune(configs=SUM_CONFIGS, key=["n"])
@triton.jit
def scale_first_block(out_ptr, x_ptr, ws_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    first = tl.atomic_cas(ws_ptr, 0, BLOCK)
    first = tl.where(first == 0, BLOCK, first)
    x = tl.load(x_ptr + offs, mask=offs < n)
    ulp = tl.where(first == 16, 0.0, 1.0).to(tl.float64) * 2.0**-51  # one float64 ulp of 2
    tl.store(out_ptr + offs, x * (2.0 + ulp), mask=offs < n)


@subject(**VEC64, family="cover_autotune_order")
def cover_autotune_order_ulp(x):
    ws = WORKSPACE.setdefault("ws64", torch.zeros(1, dtype=torch.int32))
    ws.zero_()
    out = torch.empty_like(x)
    scale_first_block[lambda meta: (triton.cdiv(x.shape[0], meta["BLOCK"]),)](out, x, ws, x.shape[0])
    return out


# %% A library's caching wrapper over an autotuned kernel, as FlagGems' LibEntry over its LibTuner: the first
# launch of a specialization goes through the tuner, later ones relaunch the config it cached (keyed without it).

class CachingEntry(triton.KernelInterface):
    def __init__(self, fn):
        self.fn = fn
        self.kernel_cache = ({},)  # one dict a device

    def run(self, *args, grid, warmup, **kwargs):
        key = tuple(str(a.dtype) if hasattr(a, "dtype") else a for a in args)
        cache = self.kernel_cache[0]
        if key not in cache:
            out = self.fn.run(*args, grid=grid, warmup=warmup, **kwargs)
            cache[key] = self.fn.best_config
            return out
        return self.fn.fn.run(*args, grid=grid, warmup=warmup, **kwargs, **cache[key].all_kwargs())


@triton.jit
def _double_wrong_at_64(out_ptr, x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    y = tl.load(x_ptr + offs, mask=offs < n) * 2
    if BLOCK == 64:
        y = y + 1  # wrong in one config only
    tl.store(out_ptr + offs, y, mask=offs < n)


WRAPPED = CachingEntry(triton.autotune(configs=CONFIGS, key=["n"], prune_configs_by={
    "early_config_prune": keep_wide_enough})(_double_wrong_at_64))


@subject(**VEC, family="cover_autotune_library_wrapper")
def cover_autotune_library_wrapper(x):
    out = torch.empty_like(x)
    WRAPPED[(1,)](out, x, x.shape[0])
    return out


def _cells(s):
    return [c for c in cells_for(s) if c.startswith("autotune")]


def test_each_declared_config_and_the_side_effects_are_cells_of_autotuned_subjects_only():
    expected = [f"autotune:config{i}" for i in range(4)] + ["autotune:benchmark", "autotune:order", "autotune:key"]
    for s in (cover_autotune_direct, cover_autotune_helper, cover_autotune_declared,
              cover_autotune_default_argument, cover_autotune_keyword_default):
        assert _cells(s) == expected, s.name
        assert tuners_for(s) == (double_one_block,)
    for c in expected:
        assert kind_of(c)[1] == c.partition(":")[2]
    assert _cells(cover_autotune_one_config) == []  # one config: nothing to tune
    from kernels_under_test.vector_add import add

    assert _cells(add) == []


def test_reveal_finds_kernels_in_closures_modules_and_classes_and_autotuned_checks_its_arguments():
    def outer():
        kernel = double_one_block

        def launcher(x):
            return kernel[(1,)](x)
        return launcher

    assert reveal(outer()) == (double_one_block,)

    class Module:
        def forward(self, x):
            return _one_block(sum_reset, x)

    assert reveal(Module()) == (sum_reset,)
    assert reveal(lambda x: x * 2) == ()


def test_a_declared_autotuned_field_is_read_first_and_checked_by_the_engine():
    # KERNELS hides the kernel from reveal(): only the declaration names it.
    assert reveal(cover_autotune_declared.target) == ()
    assert cover_autotune_declared.contract.autotuned == (double_one_block,)
    both = register(lambda x: _one_block(KERNELS["double"], x), name="cover_autotune_declared_two", **VEC,
                    autotuned=[double_one_config, double_one_block])
    assert tuners_for(both) == (double_one_config, double_one_block)  # as declared, not as revealed
    not_tuned = register(lambda x: x * 2, name="cover_autotune_declared_jit", **VEC, autotuned=(_double_block,))
    with pytest.raises(InvalidContract, match=r"autotuned=_double_block \(a \w+Function\), expected @triton.autotune"):
        tuners_for(not_tuned)


def test_the_deprecated_autotuned_decorator_still_declares_its_kernels():
    with pytest.warns(DeprecationWarning, match=r"@subject\(\.\.\., autotuned=\(kernel,\)\)"):
        mark = autotuned(double_one_block)
    launcher = mark(lambda x: _one_block(KERNELS["double"], x))
    assert reveal(launcher) == (double_one_block,)
    with pytest.raises(InvalidArgument, match="autotune"), pytest.warns(DeprecationWarning):
        autotuned(_double_block)


def test_reveal_sees_through_functools_wraps_decorators_and_into_a_function_class_at_no_extra_depth():
    # entry -> Function.forward -> helper -> kernel: three calls, whatever the decorators around them
    assert reveal(library_entry, depth=3) == (double_one_block,)
    assert reveal(library_entry, depth=2) == ()
    assert tuners_for(cover_autotune_layered) == (double_one_block,)
    assert _cells(cover_autotune_layered)[-3:] == ["autotune:benchmark", "autotune:order", "autotune:key"]


def test_config_names():
    assert config_name(CONFIGS[2]) == "BLOCK=64,num_warps=4,num_stages=3"


def test_a_config_cell_runs_only_its_config_and_names_it():
    result = run_cell(cover_autotune_helper, "autotune:config1", config=CI)
    assert result.outcome == "honoured", result.message
    assert result.message.startswith("config BLOCK=32,num_warps=2,num_stages=3: ")
    assert result.details["config"] == "BLOCK=32,num_warps=2,num_stages=3"
    assert set(result.details["launches_per_config"]) == {"BLOCK=32,num_warps=2,num_stages=3"}
    assert result.details["compiles_per_config"] is None  # the interpreter compiles nothing
    # BLOCK=16 is pruned wherever n > 16: those draws are discarded, not failed.
    narrow = run_cell(cover_autotune_helper, "autotune:config0", config=CI)
    assert narrow.outcome == "honoured" and narrow.details["pruned_discarded"] > 0, narrow.message
    assert "discarded where the kernel's own pruning drops the pinned config" in narrow.message
    # The hooks are gone afterwards: the tuner is as it was.
    assert "prune_configs" not in double_one_block.__dict__ and "run" not in double_one_block.fn.__dict__
    assert double_one_block.cache == {}


def test_a_launch_where_the_pinned_config_is_pruned_is_refused_so_the_search_discards_it():
    with Tuning((double_one_block,)) as tuning:
        tuning.pins = {id(double_one_block): "BLOCK=16,num_warps=1,num_stages=3"}
        x = torch.randn(100)
        from triton_conformance.conformance.kinds.autotune.tuning import ConfigPruned

        with pytest.raises(ConfigPruned, match="pruned here"):
            tuning.wrap(cover_autotune_direct).launcher(x=x)
        assert tuning.pruned == 1


def test_the_benchmark_cell_catches_a_missing_reset_to_zero_and_passes_with_it():
    bad = run_cell(cover_autotune_sum_no_reset, "autotune:benchmark", config=CI)
    assert (bad.outcome, bad.finding) == ("wrong", "mismatch"), bad.message
    assert "neither reset_to_zero nor restore_value" in bad.message
    assert bad.details["hooks"] == {"sum_no_reset": {"reset_to_zero": [], "restore_value": []}}
    assert "cover_autotune_sum_no_reset" in bad.reproducer and "autotune:benchmark" in bad.reproducer
    good = run_cell(cover_autotune_sum_reset, "autotune:benchmark", config=CI)
    assert good.outcome == "honoured", good.message
    # Pinned, one config runs: no benchmark, so the missing reset is invisible there.
    assert run_cell(cover_autotune_sum_no_reset, "autotune:config0", config=CI).outcome == "honoured"


def test_the_order_cell_catches_a_result_that_depends_on_which_config_ran_first():
    result = run_cell(cover_autotune_order_dependent, "autotune:order", config=CI)
    assert (result.outcome, result.finding) == ("wrong", "config-order-dependent"), result.message
    assert result.counterexample is not None
    assert run_cell(cover_autotune_direct, "autotune:order", config=CI).outcome == "honoured"


def test_the_order_cell_compares_every_bit_of_a_float64_output():
    # One ulp of float64 apart, within the oracle's tolerance: only a bitwise comparison of all 64 bits sees it.
    result = run_cell(cover_autotune_order_ulp, "autotune:order", config=CI)
    assert (result.outcome, result.finding) == ("wrong", "config-order-dependent"), result.message


def test_the_key_cell_catches_a_cached_choice_reused_for_a_dim_the_key_omits():
    result = run_cell(cover_autotune_key_omits_n, "autotune:key", config=CI)
    assert (result.outcome, result.finding) == ("unsafe", "unwritten"), result.message
    assert result.details["uncovered_dim"] == "N" and result.details["key"] == {
        "double_one_block_keyed_on_m": ["m"]}
    assert result.counterexample.spec["dims"]["N"] == 17  # shrunk: the narrowest block is 16 wide
    with pytest.raises(AssertionError, match="unwritten"):
        replay(__name__, "cover_autotune_key_omits_n", "autotune:key", Spec.from_dict(result.counterexample.spec))
    assert run_cell(cover_autotune_direct, "autotune:key", config=CI).outcome == "honoured"


class _Drawn(Observer):
    def __init__(self):
        self.dims = []

    def example_started(self, subject, cell, spec):
        self.dims.append(spec.dims["N"])


def _drawn(cell, profile, seed):
    seen = _Drawn()
    run_cell(cover_autotune_direct, cell, config=run_config(profile=profile, seed=seed), observer=seen)
    return seen.dims


@pytest.mark.parametrize("cell", ["autotune:order", "autotune:key"])
def test_the_probe_cells_draw_with_the_run_seed_unless_the_profile_is_derandomized(cell):
    # A fresh-seed run (bench/false_alarms.py) must draw fresh examples in these cells too.
    assert _drawn(cell, "dev", 1) == _drawn(cell, "dev", 1)
    assert _drawn(cell, "dev", 1) != _drawn(cell, "dev", 2)
    assert _drawn(cell, "ci", 1) == _drawn(cell, "ci", 2)


def test_a_library_caching_wrapper_is_seen_through_and_its_kernel_cache_cleared_with_the_tuner():
    from triton_conformance.conformance.kinds.autotune.wrappers import tuner_of

    assert tuners_for(cover_autotune_library_wrapper) == (WRAPPED.fn,)
    assert _cells(cover_autotune_library_wrapper)[:4] == [f"autotune:config{i}" for i in range(4)]
    x, (at_64, at_128) = torch.randn(50), (config_name(CONFIGS[2]), config_name(CONFIGS[3]))
    with Tuning(tuners_for(cover_autotune_library_wrapper)) as tuning:
        tuning.pins = {id(WRAPPED.fn): at_64}
        tuning.wrap(cover_autotune_library_wrapper).launcher(x=x)  # the wrapper caches BLOCK=64's kernel
        tuning.pins = {id(WRAPPED.fn): at_128}
        cover_autotune_library_wrapper.launcher(x=x)  # served from the wrapper's cache: the tuner never asked
        assert dict(tuning.launches) == {at_64: 2}
        out = tuning.wrap(cover_autotune_library_wrapper).launcher(x=x)  # both caches cleared: the pin runs
        assert dict(tuning.launches) == {at_64: 2, at_128: 1}
    torch.testing.assert_close(out, x * 2)
    assert WRAPPED.kernel_cache == ({},)
    caught = run_cell(cover_autotune_library_wrapper, "autotune:config2", config=CI)
    assert (caught.outcome, caught.finding) == ("wrong", "mismatch"), caught.message
    passed = run_cell(cover_autotune_library_wrapper, "autotune:config3", config=CI)
    assert passed.outcome == "honoured" and set(passed.details["launches_per_config"]) == {config_name(CONFIGS[3])}

    class Loop:  # an object whose .fn leads back to itself: the walk ends, finding nothing
        def __init__(self):
            self.fn = self

    assert tuner_of(Loop()) is None


def test_the_key_cell_primes_at_the_drawn_sizes_neighbours_where_the_minimum_prunes_the_harmful_config(
        monkeypatch):
    from tests.zoo import zoo_autotune_reach as zoo
    from triton_conformance.conformance.kinds.autotune import probes

    caught = run_cell(zoo.zoo_matmul_split_k_key_omits_k, "autotune:key", config=CI)
    assert (caught.outcome, caught.finding) == ("wrong", "mismatch"), caught.message
    assert caught.details["uncovered_dim"] == "K" and caught.details["prime"]["K"] > 1
    assert "SPLIT_K=1," not in caught.details["cached_config"]["split_k_kernel_keyed_mn"]
    assert run_cell(zoo.zoo_matmul_split_k, "autotune:key", config=CI).outcome == "honoured"
    assert probes.prime_sizes(zoo.zoo_matmul_split_k.contract, "K", 37) == [36, 38, 32, 18, 1, 74]
    # Primed at K's minimum alone (K = 1: only SPLIT_K=1 divides it), the harmful split is never cached.
    monkeypatch.setattr(probes, "prime_sizes", lambda contract, sym, n: [contract.dims[sym].min])
    missed = run_cell(zoo.zoo_matmul_split_k_key_omits_k, "autotune:key", config=CI)
    assert missed.outcome == "honoured", missed.message


def test_the_config_cells_of_a_subject_with_a_backward_run_its_tuned_backward_in_each_config():
    from tests.zoo import zoo_autotune_reach as zoo

    bug = zoo.zoo_layer_norm_autotuned_bwd_block_sum
    assert tuners_for(bug) == (zoo.ln_bwd_kernel_block_sum,)  # found in the Function's backward
    caught = run_cell(bug, "autotune:config2", config=CI)
    assert (caught.outcome, caught.finding) == ("wrong", "mismatch"), caught.message
    assert caught.details["gradient"] == "x" and "(forward and backward)" in caught.message
    assert "grad_output" in caught.counterexample.tensors
    assert set(caught.details["launches_per_config"]) == {"BLOCK_M=4,num_warps=4,num_stages=3"}
    # One row a program: right; and the grad cells, which run the survivor with the largest blocks under the
    # interpreter's autotune shim (BLOCK_M=4 here), catch it too.
    assert run_cell(bug, "autotune:config1", config=CI).outcome == "honoured"
    from triton_conformance import compat

    before = compat.installed(), compat.current_target()
    compat.install(["autotune"])
    try:
        graded = run_cell(bug, "grad:layout:contiguous", config=CI)
        assert (graded.outcome, graded.finding) == ("wrong", "mismatch"), graded.message
    finally:
        compat.uninstall(["autotune"])
        if before[0]:
            compat.install(before[0], target=before[1])
    assert run_cell(zoo.zoo_layer_norm_autotuned_bwd, "autotune:config3", config=CI).outcome == "honoured"


def test_a_config_cell_whose_kernel_no_draw_launches_says_so_instead_of_passing():
    assert set(tuners_for(cover_autotune_unreached)) == {double_one_block, double_five_configs}
    unrun = run_cell(cover_autotune_unreached, "autotune:config4", config=CI)  # the fifth config: only its own
    assert unrun.outcome == "skipped" and "never launched: no draw reached _double_block" in unrun.message
    first = run_cell(cover_autotune_unreached, "autotune:config3", config=CI)
    assert first.outcome == "honoured" and "(_double_block never launched" in first.message, first.message
