"""The interpreter compatibility layer (triton_conformance/compat): one test per shim, each failing
without its shim and passing with it; bf16 cells that run (and catch a bf16-only bug) on the CPU."""

import os
import warnings

os.environ.setdefault("TRITON_INTERPRET", "1")  # before any @triton.jit below is defined

import pytest
import torch
import triton
import triton.tools.tensor_descriptor

import triton_conformance as tc
from triton_conformance import ConformanceUsageError, Dim, Tensor, compat
from triton_conformance.compat import DEFAULT_TARGET, SHIMS, TargetDevice
from triton_conformance.conformance import backend as backend_module
from triton_conformance.conformance.runner import run_cell
from triton_conformance.errors import InvalidArgument
from triton_conformance.model.config import run_config

pytestmark = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="the layer is interpreter-only")

from tests.compat_kernels import bf16_sum, kernels  # noqa: E402  (after TRITON_INTERPRET)

NO_CUDA = pytest.mark.skipif(torch.cuda.is_available(), reason="torch has CUDA here: nothing to remap")


pytestmark = pytest.mark.usefixtures("no_shims")  # tests/cover/conftest.py: each test starts with none


def only(name, **kw):
    assert compat.install([name], **kw) == (name,)


# -- the API ------------------------------------------------------------------------------


def test_every_shim_is_named_described_installed_and_removed_again():
    assert tuple(SHIMS) == ("nested_calls", "fast_paths", "libdevice", "autotune", "device_context", "device_properties", "cuda_allocations",
                            "torch_hip", "vendor_blas", "nvidia_smi", "jit_function", "compiled_kernel", "tensor_wrappers",
                            "lang_globals", "float_scalars", "loop_vars", "overflow_checks", "fp8", "bf16",
                            "descriptors")
    assert all(isinstance(line, str) and line and "\n" not in line for line in SHIMS.values())
    watched = [(torch.cuda, "get_device_capability"), (torch.cuda, "device"), (torch, "full"),
               (torch.Tensor, "to"), (triton.runtime.interpreter, "_implicit_cvt"), (triton.runtime, "JITFunction"),
               (triton.runtime.interpreter.InterpretedFunction, "run"), (triton.runtime.interpreter, "_patch_lang"),
               (triton.runtime.interpreter.GridExecutor, "_init_args_hst"),
               (triton.runtime.interpreter.InterpreterBuilder, "binary_op"),
               (triton.runtime.autotuner.Autotuner, "prune_configs"),
               (triton.runtime.interpreter.interpreter_builder, "options"),
               (triton.tools.tensor_descriptor.TensorDescriptor, "__post_init__"),
               (triton.runtime.interpreter, "_get_np_dtype"), (triton.language.core, "_unwrap_if_constexpr"),
               (triton.runtime.interpreter.InterpreterBuilder, "create_make_tensor_descriptor")]
    originals = [getattr(obj, name) for obj, name in watched]
    assert compat.install() == tuple(SHIMS) == compat.installed()
    patched = [getattr(obj, name) for obj, name in watched]
    assert all(p is not o for p, o in zip(patched, originals))
    assert compat.install() == tuple(SHIMS)  # idempotent: nothing wrapped twice
    assert [getattr(obj, name) for obj, name in watched] == patched
    assert compat.current_target() == DEFAULT_TARGET
    assert compat.uninstall(["bf16", "libdevice"]) == ("libdevice", "bf16")
    assert compat.installed() == tuple(n for n in SHIMS if n not in ("bf16", "libdevice"))
    assert compat.uninstall() == tuple(n for n in SHIMS if n not in ("bf16", "libdevice"))
    assert compat.installed() == () and compat.current_target() is None
    assert [getattr(obj, name) for obj, name in watched] == originals
    assert not hasattr(torch.cpu, "device")


def test_nothing_is_applied_off_the_interpreter_and_unknown_names_are_refused(monkeypatch):
    with pytest.raises(ConformanceUsageError, match="unknown compat shim.*'libdevise'"):
        compat.install(["libdevise"])
    with pytest.raises(ConformanceUsageError, match="expected a TargetDevice"):
        compat.install(target=(9, 0))
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    assert compat.install() == () and compat.installed() == ()


def test_the_target_device_is_validated_and_answers_both_torch_and_triton():
    t = DEFAULT_TARGET
    assert (t.capability, t.multiprocessor_count, t.warp_size, t.arch) == ((9, 0), 132, 32, 90)
    assert t.max_shared_mem == 227 * 1024 and t.shared_memory_per_multiprocessor == 228 * 1024
    assert t.l2_cache_size == 50 << 20 and "H100" in t.name
    props = t.torch_properties()
    assert (props.major, props.minor, props.multi_processor_count) == (9, 0, 132)
    with pytest.raises(AttributeError, match="read-only"):
        props.multi_processor_count = 1
    assert t.triton_properties()["max_shared_mem"] == t.max_shared_mem
    with pytest.raises(InvalidArgument, match="capability"):
        TargetDevice(capability=(9,))
    with pytest.raises(InvalidArgument, match="multiprocessor_count=0"):
        TargetDevice(multiprocessor_count=0)


# -- one test per shim --------------------------------------------------------------------


def test_libdevice_functions_compute_instead_of_returning_none():
    x = torch.tensor([0.25, 0.5, 1.0, 1.5, 2.0, 3.75, float("inf"), float("nan")])
    with pytest.raises(triton.runtime.errors.InterpreterError, match="NoneType"):
        kernels.libdevice_launch(x)
    only("libdevice")
    out, flags = kernels.libdevice_launch(x)
    ref, ref_flags = kernels.libdevice_reference(x)
    finite = torch.isfinite(x)
    torch.testing.assert_close(out[finite], ref[finite], rtol=2e-6, atol=1e-6)
    assert torch.isnan(out[-1]) and torch.equal(flags[finite], ref_flags[finite])
    assert flags[-2].item() % 4 == 2 and flags[-1].item() % 4 == 1  # isinf, isnan
    compat.uninstall()
    with pytest.raises(triton.runtime.errors.InterpreterError):  # the early-bound rsqrt is restored too
        kernels.libdevice_launch(x)


def test_autotune_honours_the_kernels_pruning_and_runs_one_config_untimed():
    x = torch.arange(100, dtype=torch.float32)
    tuner = kernels.autotuned_add_one
    tuner.cache.clear()
    with pytest.raises(RuntimeError, match="active drivers"):
        kernels.autotuned_launch(x)
    only("autotune")
    assert torch.equal(kernels.autotuned_launch(x), x + 1)
    survivors = compat.surviving_configs(tuner)
    # early_config_prune keeps BLOCK >= 25 (4 configs); the perf model ranks 64 before 32; top_k=3
    assert [(c.kwargs["BLOCK"], c.num_warps) for c in survivors] == [(64, 2), (64, 4), (32, 2)]
    assert tuner.best_config is survivors[0]
    with compat.pin_config(tuner, 2):
        assert torch.equal(kernels.autotuned_launch(x), x + 1)
        assert tuner.best_config is compat.surviving_configs(tuner)[2]
    with compat.pin_config(tuner, 3), pytest.raises(InvalidArgument, match="kept 3 config"):
        kernels.autotuned_launch(x)
    with pytest.raises(InvalidArgument, match="expected an @triton.autotune kernel"):
        compat.surviving_configs(kernels.copy_kernel)
    tuner.cache.clear()


def test_device_contexts_are_no_ops_for_cpu_tensors():
    x = torch.arange(40, dtype=torch.float32)
    if not torch.cuda.is_available():
        with pytest.raises((ValueError, RuntimeError, AssertionError)):
            kernels.guarded_launch(x)
    only("device_context")
    assert torch.equal(kernels.guarded_launch(x), x)
    with torch.cpu.device("cpu"), torch.cuda.device(0), torch.cuda.device_of(x):
        pass


def test_device_queries_are_answered_from_the_declared_target():
    x = torch.arange(40, dtype=torch.float32)
    available = torch.cuda.is_available(), torch.cuda.device_count()
    if not available[0]:
        with pytest.raises((AssertionError, RuntimeError)):
            kernels.persistent_launch(x)
    only("device_properties")
    out, programs, block = kernels.persistent_launch(x)
    assert torch.equal(out, x) and (programs, block) == (132, 16)
    assert torch.cuda.get_device_capability() == (9, 0) and "H100" in torch.cuda.get_device_name(0)
    target = triton.runtime.driver.active.get_current_target()
    assert (target.backend, target.arch, target.warp_size) == ("cuda", 90, 32)
    assert torch.cuda.is_available() == available[0]  # not faked: code that branches on it takes its CPU path
    assert torch.cuda.device_count() == (available[1] if available[0] else 1)  # the target, device 0
    ampere = TargetDevice(name="NVIDIA A100-SXM4-80GB", capability=(8, 0), multiprocessor_count=108,
                          max_shared_mem=163 * 1024)
    assert compat.install(["device_properties"], target=ampere) == ("device_properties",)
    _, programs, block = kernels.persistent_launch(x)
    assert (programs, block) == (108, 8) and triton.runtime.driver.active.get_current_target().arch == 80
    assert compat.current_target() == ampere


@NO_CUDA
def test_hard_coded_cuda_allocations_land_on_the_cpu():
    x = torch.arange(40, dtype=torch.float32)
    with pytest.raises((AssertionError, RuntimeError), match="CUDA"):
        kernels.cuda_allocating_launch(x)
    only("cuda_allocations")
    out = kernels.cuda_allocating_launch(x)
    assert out.device.type == "cpu" and torch.equal(out, x)
    assert torch.ones(2).to("cuda", torch.float16).dtype == torch.float16
    assert torch.zeros(1).new_full((3,), 2.0, device=torch.device("cuda")).device.type == "cpu"


def _zeros_beside(x: torch.Tensor) -> torch.Tensor:
    return torch.zeros_like(x) + x


@NO_CUDA
def test_torchscript_still_compiles_the_factories_the_allocations_shim_wraps():
    # torch's jvp decompositions script such functions at import (issue 28: the import failed under the shim)
    only("cuda_allocations")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # torch.jit.script is deprecated; torch still uses it
        scripted = torch.jit.script(_zeros_beside)
    assert torch.equal(scripted(torch.ones(3)), torch.ones(3))
    assert "aten::zeros_like" in str(scripted.graph)


def test_float_arguments_arrive_as_fp32_scalars():
    x = torch.arange(20, dtype=torch.float32)
    out = torch.empty_like(x)
    with pytest.raises(triton.runtime.errors.InterpreterError, match="'float' object has no attribute 'to'"):
        kernels.scale_kernel[(1,)](x, out, 2.5, 20, BLOCK=32)
    only("float_scalars")
    kernels.scale_kernel[(1,)](x, out, 2.5, 20, BLOCK=32)
    assert torch.equal(out, x * 2.5)


def test_range_loop_variables_are_tensors():
    x = torch.arange(50, dtype=torch.float32)
    out = torch.full_like(x, -1)
    with pytest.raises(triton.runtime.errors.InterpreterError, match="'int' object has no attribute 'to'"):
        kernels.blocked_copy_kernel[(1,)](x, out, 50, BLOCK=16, NUM_BLOCKS=4)
    only("loop_vars")
    kernels.blocked_copy_kernel[(1,)](x, out, 50, BLOCK=16, NUM_BLOCKS=4)
    assert torch.equal(out, x)


# -- bf16 ---------------------------------------------------------------------------------


def test_bf16_arithmetic_rounds_to_nearest_even_once_per_operation():
    values = torch.tensor([1.0, 1.00390625, 1.5, -2.75, 3.0e38, 1e-3, 0.0, -0.0], dtype=torch.bfloat16)
    expected = values * values + 0.5  # torch: each bf16 op computed in fp32 and rounded to nearest even
    out = torch.empty_like(values)
    kernels.add_half_bf16[(1,)](values, out, values.numel(), BLOCK=8)
    assert not torch.equal(out, expected)  # bit patterns multiplied as integers
    assert backend_module.probe_interpreter_bf16.__wrapped__() is not None
    only("bf16")
    kernels.add_half_bf16[(1,)](values, out, values.numel(), BLOCK=8)
    assert torch.equal(out.view(torch.int16), expected.view(torch.int16))
    assert backend_module.probe_interpreter_bf16() is None  # the engine's cached probe is refreshed
    compat.uninstall(["bf16"])
    assert backend_module.probe_interpreter_bf16() is not None


def test_bf16_reductions_scans_and_dot():
    from triton_conformance.compat.bf16 import decode, encode

    # Exact ties between neighbouring bf16 values (low bits 0x8000): 1 + 2^-8 lies halfway between 1 and 1 + 2^-7,
    # 1 + 3 * 2^-8 between 1 + 2^-7 and 1 + 2^-6. To even, the first goes down and the second up, so neither
    # rounding half up nor half down (nor truncation) passes both.
    ties = torch.tensor([1.00390625, 1.01171875, -1.00390625, -1.01171875], dtype=torch.float32)
    assert (ties.view(torch.int32) & 0xFFFF).eq(0x8000).all()
    rounded = torch.from_numpy(decode(encode(ties.numpy())))
    assert rounded.tolist() == [1.0, 1.015625, -1.0, -1.015625]
    assert torch.equal(rounded, ties.bfloat16().float())
    assert torch.isnan(torch.from_numpy(decode(encode(torch.tensor([float("nan"), -float("nan")]).numpy())))).all()
    assert decode(encode(torch.tensor([3.4e38]).numpy())).item() == float("inf")  # rounds past the largest bf16
    import triton.language as tl

    @triton.jit
    def reduce_kernel(x_ptr, out_ptr, cs_ptr, dot_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs)
        tl.store(out_ptr, tl.sum(x, axis=0))
        tl.store(out_ptr + 1, tl.max(x, axis=0))
        tl.store(out_ptr + 2, tl.min(x, axis=0))
        tl.store(cs_ptr + offs, tl.cumsum(x, axis=0))
        m = tl.reshape(x, (4, BLOCK // 4))
        r = tl.arange(0, 4)
        tl.store(dot_ptr + r[:, None] * 4 + r[None, :], tl.dot(m, tl.trans(m)))

    only("bf16")
    x = torch.tensor([-3.5, 2.0, 0.125, -0.75, 1.0, 8.0, -6.0, 0.5, 1.5, -1.0, 2.5, 0.25, -0.5, 4.0, 3.0, -2.0],
                     dtype=torch.bfloat16)  # exactly representable partial sums
    out = torch.empty(3, dtype=torch.bfloat16)
    cs = torch.empty(16, dtype=torch.bfloat16)
    dot = torch.empty(16, dtype=torch.float32)
    reduce_kernel[(1,)](x, out, cs, dot, BLOCK=16)
    assert out.tolist() == [x.float().sum().item(), 8.0, -6.0]
    assert torch.equal(cs.float(), x.float().cumsum(0))
    m = x.float().reshape(4, 4)
    assert torch.equal(dot.reshape(4, 4), m @ m.T)


def _row_sum_subject(launcher):
    return tc.register(launcher, name=f"compat_{launcher.__name__}", inputs={"x": Tensor(("M", "N"),
                       dtypes=("bfloat16",))}, dims={"M": Dim(1, 8), "N": Dim(1, 2048)}, oracle=bf16_sum.oracle,
                       reduces="N")


def test_bf16_cells_run_on_the_cpu_and_catch_a_bf16_only_bug():
    """Without the shim a bf16 cell is skipped here; with it a correct kernel passes and a kernel that
    accumulates in bf16 (so loses precision on long rows) is caught, on the CPU."""
    config = run_config(profile="ci")
    correct, buggy = _row_sum_subject(bf16_sum.row_sum), _row_sum_subject(bf16_sum.row_sum_bf16_accumulator)
    backend_module.probe_interpreter_bf16.cache_clear()
    skipped = run_cell(correct, "dtype:bfloat16", backend=backend_module.current_backend("interpreter"),
                       config=config)
    assert skipped.outcome == "skipped" and "raw bit patterns" in skipped.message
    only("bf16")
    backend = backend_module.current_backend("interpreter")
    assert backend.untestable == {}
    honoured = run_cell(correct, "dtype:bfloat16", backend=backend, config=config)
    assert honoured.outcome == "honoured", honoured.message
    caught = run_cell(buggy, "dtype:bfloat16", backend=backend, config=config)
    assert caught.outcome == "wrong" and "outside tolerance" in caught.message, (caught.outcome, caught.message)


def test_overflow_checks_that_only_debug_would_assert_are_not_computed():
    from triton.runtime import interpreter

    made = []
    original = interpreter.TensorHandle.__post_init__

    def counting(self):
        made.append(1)
        original(self)

    x = torch.randn(8, 33).t().contiguous().t()  # column-major: strided loads
    counts, outputs = {}, {}
    for shims in ((), ("overflow_checks",)):
        compat.uninstall()
        compat.install(shims)
        made.clear()
        interpreter.TensorHandle.__post_init__ = counting
        try:
            outputs[shims] = kernels.strided_copy(x)
        finally:
            interpreter.TensorHandle.__post_init__ = original
        counts[shims] = len(made)
    assert torch.equal(outputs[()], x) and torch.equal(outputs[("overflow_checks",)], x)
    assert counts[("overflow_checks",)] < counts[()] / 2, counts  # each index op built its int64 check


def test_jit_calls_inside_a_kernel_do_not_patch_the_language_again():
    from triton.runtime import interpreter

    scans = []
    original = interpreter._patch_builtin

    def counting(*args, **kwargs):
        scans.append(1)
        return original(*args, **kwargs)

    x = torch.randn(6, 20)
    expected = x.norm(dim=1) + x.max(dim=1).values
    counts = {}
    for shims in ((), ("nested_calls",)):
        compat.uninstall()
        compat.install(shims)
        scans.clear()
        interpreter._patch_builtin = counting
        try:
            out = kernels.nested_calls(x)
        finally:
            interpreter._patch_builtin = original
        assert torch.allclose(out, expected, atol=1e-5), shims
        counts[shims] = len(scans)
    assert counts[("nested_calls",)] * 4 <= counts[()], counts  # the launch's patch only, not one per call


def test_outside_a_pinned_config_the_interpreter_runs_the_survivor_with_the_largest_blocks():
    from triton_conformance.compat.autotune import interpreted_fastest

    def config(**kwargs):
        return triton.Config(kwargs, num_warps=4)

    rows = [config(BLOCK_N=16), config(BLOCK_N=128), config(BLOCK_N=64)]
    assert interpreted_fastest(rows) is rows[1]
    tiles = [config(BLOCK_M=4, BLOCK_N=32, GROUP_M=8), config(BLOCK_M=8, BLOCK_N=32, GROUP_M=1),
             config(BLOCK_SIZE=256, SPLIT_K=4)]
    assert interpreted_fastest(tiles) is tiles[1]  # 256 elements, as the third, and first of the two
    no_blocks = [config(SPLIT_K=1), config(SPLIT_K=4)]
    assert interpreted_fastest(no_blocks) is no_blocks[0]
