"""The compat layer's shims for library runtimes over @triton.jit (triton_conformance/compat/runtime.py,
smi.py, autotune.py, devices.torch_hip): each test fails without its shim and passes with it, on a small
runtime of tests/compat_kernels/runtimes.py written as the library it stands for writes its own."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # before any @triton.jit below is defined

import shutil
import subprocess

import pytest
import torch
import triton

from triton_conformance import compat
from triton_conformance.compat import TargetDevice

pytestmark = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="the layer is interpreter-only")

from tests.compat_kernels import runtimes  # noqa: E402  (after TRITON_INTERPRET)


pytestmark = pytest.mark.usefixtures("no_shims")  # tests/cover/conftest.py: each test starts with none


def only(*names, **kw):
    assert compat.install(names, **kw) == tuple(n for n in compat.SHIMS if n in names)


def test_a_caching_entry_reaches_the_kernel_and_relaunches_what_run_returned():
    x = torch.arange(40, dtype=torch.float32)
    with pytest.raises(AttributeError, match="'function' object has no attribute 'fn'"):
        runtimes.CachingEntry(runtimes.scale_kernel)  # walks .fn past the interpreted kernel
    only("jit_function")
    entry = runtimes.CachingEntry(runtimes.scale_kernel)
    assert [p.name for p in entry.jit_function.params if p.is_constexpr] == ["BLOCK"]
    assert torch.equal(runtimes.cached_scale_launch(entry, x), x * 2)  # the first launch, through run
    with pytest.raises(TypeError, match="'NoneType' object is not subscriptable"):
        runtimes.cached_scale_launch(entry, x)  # run returned None: nothing to relaunch
    only("jit_function", "compiled_kernel")
    entry = runtimes.CachingEntry(runtimes.scale_kernel)
    for y in (x, -x, x + 0.5):  # the cached kernel is relaunched with each call's arguments
        assert torch.equal(runtimes.cached_scale_launch(entry, y), y * 2)
    assert entry.launches == 2


def test_a_relaunch_reads_its_arguments_as_tritons_launcher_does():
    only("compiled_kernel")
    x = torch.arange(20, dtype=torch.float32)
    out = torch.empty_like(x)
    kernel = runtimes.scale_kernel.run(x, out, 20, 1.0, BLOCK=32, grid=(1,), warmup=False)
    assert kernel.constants == {"BLOCK": 32} and kernel.metadata.num_warps == 4
    kernel[(1,)](x, out, 20, 5.0)  # the trailing constexpr's slot is never read
    assert torch.equal(out, x * 5)
    kernel[(1,)](x, out, 20, 4.0, 999)  # a constexpr's slot is read past: the compiled BLOCK stands
    assert torch.equal(out, x * 4)
    with pytest.raises(TypeError, match="'scale' is #3 .* read past the end"):
        kernel[(1,)](x, out, 20)


def test_an_autotuner_subclass_with_its_own_cache_and_benchmark():
    x = torch.arange(100, dtype=torch.float32)
    with pytest.raises(AttributeError, match="'function' object has no attribute 'fn'"):
        runtimes.tuned_scale()  # its cache key walks .fn to the JITFunction
    only("jit_function")
    with pytest.raises(RuntimeError, match="0 active drivers|no GPU to benchmark"):
        runtimes.tuned_scale_launch(runtimes.tuned_scale(), x)  # it times even a single survivor
    only("jit_function", "autotune")
    runtimes.PersistentConfigs.table[("scale_kernel_stale", (100,))] = "a config from another run"
    tuner = runtimes.tuned_scale()
    assert isinstance(tuner.cache, dict)  # kept in memory: no choice from a past run
    assert torch.equal(runtimes.tuned_scale_launch(tuner, x), x * 2)
    assert tuner.best_config.kwargs == {"BLOCK": 32}  # the first survivor, untimed
    with compat.pin_config(tuner, 1):
        assert torch.equal(runtimes.tuned_scale_launch(tuner, x), x * 2)
        assert tuner.best_config.kwargs == {"BLOCK": 8}


def test_kernels_generated_at_import_are_jit_functions_and_see_triton_language():
    x = torch.arange(30, dtype=torch.float32)
    with pytest.raises(AssertionError, match="is not a JITFunction"):
        runtimes.generate("twice_a", "x * 2")
    only("jit_function")
    kernel = runtimes.generate("twice_b", "x * 2")
    with pytest.raises(triton.runtime.errors.InterpreterError, match="triton.language must be visible"):
        runtimes.generated_launch(kernel, x)  # the scalar function's module has no triton.language
    with pytest.raises(triton.runtime.errors.InterpreterError, match="arange's arguments must be .*constexpr"):
        runtimes.generated_launch(runtimes.generate("twice_c", "x * 2", spell_out=True), x)
    only("jit_function", "lang_globals")
    for name, spell_out in (("twice_d", False), ("twice_e", True)):
        kernel = runtimes.generate(name, "x * 2", spell_out=spell_out)
        assert torch.equal(runtimes.generated_launch(kernel, x), x * 2)
    assert isinstance(kernel, triton.JITFunction) and isinstance(kernel, triton.runtime.JITFunction)
    assert not isinstance(kernel.fn, triton.JITFunction)  # the plain function is not one
    assert kernel.src.startswith("def twice_e(") and len(kernel.cache_key) == 64


def test_a_tensor_like_wrapper_reaches_the_kernel_in_place():
    x = torch.arange(25, dtype=torch.float32)
    with pytest.raises(AttributeError, match="new_empty"):
        runtimes.reversed_copy(x)
    only("tensor_wrappers")
    assert torch.equal(runtimes.reversed_copy(x), x.flip(0))


def test_warmup_returns_a_kernel_that_sizes_a_persistent_grid():
    x = torch.randn(300, 37)
    only("device_properties")
    with pytest.raises(AttributeError, match="'NoneType' object has no attribute '_init_handles'"):
        runtimes.occupancy_launch(x)
    only("device_properties", "compiled_kernel")
    out, programs = runtimes.occupancy_launch(x)
    # 65536 registers / (32 a thread x 32 x 8 warps) = 8 programs an SM; shared memory allows more
    assert torch.equal(out, x) and programs == min(132 * 8, 300)
    small = TargetDevice(multiprocessor_count=16, max_shared_mem=2048)
    assert compat.install(["device_properties", "compiled_kernel"], target=small)
    out, programs = runtimes.occupancy_launch(x)
    assert torch.equal(out, x) and programs == 16 * 2  # 2 KiB / (8 warps x 32 threads x 4 bytes)


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="a real nvidia-smi is here")
def test_the_vendor_tool_answers_for_the_declared_target():
    with pytest.raises(RuntimeError, match="No device were detected"):
        runtimes.vendor()
    only("nvidia_smi")
    assert runtimes.vendor() == "nvidia"
    query = ["nvidia-smi", "--query-gpu=name,memory.total,compute_cap,clocks.max.sm", "--format=csv,noheader"]
    assert subprocess.run(query, capture_output=True, text=True).stdout.strip() == \
        "NVIDIA H100 80GB HBM3, 81920 MiB, 9.0, [N/A]"
    ampere = TargetDevice(name="NVIDIA A100-SXM4-80GB", capability=(8, 0))
    assert compat.install(["nvidia_smi"], target=ampere) == ("nvidia_smi",)
    listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout
    assert listed.startswith("GPU 0: NVIDIA A100-SXM4-80GB (UUID: ")
    compat.uninstall(["nvidia_smi"])
    assert shutil.which("nvidia-smi") is None  # off PATH again, and the folder is gone


@pytest.mark.skipif(hasattr(torch, "hip"), reason="this torch has torch.hip")
def test_torch_hip_says_there_is_no_hip_device():
    with pytest.raises(AttributeError, match="has no attribute 'hip'"):
        runtimes.block_for_platform()
    only("torch_hip")
    assert runtimes.block_for_platform() == 32 and torch.hip.device_count() == 0
    compat.uninstall(["torch_hip"])
    assert not hasattr(torch, "hip")


def test_vendor_blas_handles_are_built_without_the_library_and_refuse_to_run():
    from triton._C.libtriton import nvidia

    workspace = torch.empty(32, dtype=torch.uint8)
    with pytest.raises(RuntimeError, match="libcublas"):
        nvidia.cublas.CublasLt(workspace)  # a CPU machine: the library does not load
    only("vendor_blas")
    handle = nvidia.cublas.CublasLt(workspace)  # as tutorial 09 builds it at import
    with pytest.raises(RuntimeError, match="CublasLt.matmul: no vendor BLAS under the Triton interpreter"):
        handle.matmul(workspace, workspace, workspace)
    compat.uninstall(["vendor_blas"])
    with pytest.raises(RuntimeError, match="libcublas"):
        nvidia.cublas.CublasLt(workspace)
