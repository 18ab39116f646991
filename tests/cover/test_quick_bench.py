"""On CUDA a real tuner's benchmark is shortened for the cells' duration (conformance/autotune.py)."""

import triton
import triton.language as tl

from triton_conformance.conformance.kinds.autotune import tuning as autotune


@triton.autotune(configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})], key=["n"])
@triton.jit
def _copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n), mask=offsets < n)


def benchmark_of(tuner):
    """What the tuner calls to time a config (read from the instance: triton 3.9's property needs a driver)."""
    return tuner.__dict__.get(autotune._bench_attr(tuner))


def test_the_tuner_ranks_configs_with_the_quick_benchmark_while_active_and_not_after():
    before = benchmark_of(_copy)
    with autotune.quick_benchmarks([_copy]):
        assert benchmark_of(_copy) is autotune._quick_bench
    assert benchmark_of(_copy) is before


def test_a_cells_tuning_hooks_take_precedence_over_the_quick_benchmark():
    with autotune.quick_benchmarks([_copy]), autotune.Tuning([_copy]):
        inner = benchmark_of(_copy)
        assert inner is not None and inner is not autotune._quick_bench  # the autotune cells' emulated one
    assert benchmark_of(_copy) is not autotune._quick_bench


def test_an_autotuned_subjects_compile_budget_pays_for_every_config_of_a_class():
    import triton_conformance as tc
    from triton_conformance import Dim, Tensor
    from triton_conformance.conformance.backend import Backend
    from triton_conformance.conformance.runner import cell_allowance
    from triton_conformance.conformance.search.policy import SearchPolicy
    from triton_conformance.model.config import run_config

    def launch_copy(x):
        y = x.new_empty(x.shape)
        _copy[(1,)](x, y, x.numel())
        return y

    def plain(x):
        return x * 1.0

    tuned = tc.register(launch_copy, name="cover_quick_bench_tuned", inputs={"x": Tensor(("N",))},
                        dims={"N": Dim(1, 64)}, oracle=lambda x: x)
    untuned = tc.register(plain, name="cover_quick_bench_plain", inputs={"x": Tensor(("N",))},
                          dims={"N": Dim(1, 64)}, oracle=lambda x: x)
    cuda = Backend(name="cuda", device="cpu")
    nightly = SearchPolicy.of(run_config(profile="nightly"))

    def budget(subject, backend):  # noqa: ANN001, ANN202
        with cell_allowance(subject, "layout:contiguous", backend, nightly) as allowance:
            return allowance.compile_budget

    assert budget(tuned, cuda) == 2 * 16  # two configs
    assert budget(untuned, cuda) == 16
    assert budget(tuned, Backend()) is None  # the interpreter compiles nothing
