"""Library runtimes over @triton.jit, small, as FlagGems and the Triton tutorials write them (one per compat shim).

Each trips over the interpreter the way its model does: a caching entry that
walks ``.fn`` to the ``JITFunction`` and relaunches the kernel ``run`` returned;
an ``Autotuner`` subclass with its own (persistent) cache and benchmark; kernels
generated as source text at import with an ``isinstance(fn, JITFunction)``
assert, in a module that never imports ``triton.language``; a tensor-like
wrapper; the softmax tutorial's ``warmup`` occupancy query; a vendor probe.
"""

import importlib.util
import os
import subprocess
import tempfile

import torch
import triton
import triton.language as tl
from triton.runtime.autotuner import Autotuner


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * scale, mask=mask)


# -- a caching entry (FlagGems' libentry) -------------------------------------------------------


class CachingEntry:
    """Launches through ``fn.run`` once per specialization, then relaunches the kernel it returned."""

    def __init__(self, fn):
        self.fn = fn
        jit = fn
        while not isinstance(jit, triton.runtime.JITFunction):
            jit = jit.fn
        self.jit_function = jit
        self.runtime = [p.num for p in jit.params if not p.is_constexpr]
        self.cache = {}
        self.launches = 0

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.run(*args, grid=grid, **kwargs)

    def run(self, *args, grid, **kwargs):
        key = tuple((a.dtype, a.data_ptr() % 16 == 0) if hasattr(a, "data_ptr") else a
                    for i, a in enumerate(args) if i in self.runtime) + tuple(sorted(kwargs.items()))
        if key not in self.cache:
            self.cache[key] = self.fn.run(*args, grid=grid, warmup=False, **kwargs)
            return
        self.launches += 1
        self.cache[key][grid](*(a for i, a in enumerate(args) if i in self.runtime))  # constexprs last: skipped


def cached_scale_launch(entry, x, scale=2.0):
    out = torch.empty_like(x)
    entry[(triton.cdiv(x.numel(), 16),)](x, out, x.numel(), scale, BLOCK=16)
    return out


# -- an Autotuner subclass with its own cache (FlagGems' LibTuner) --------------------------------


class PersistentConfigs:
    """A config cache that is not a dict (LibTuner's is a database), shared by every tuner and process."""

    table = {}

    def __init__(self, name):
        self.name = name

    def __contains__(self, key):
        return (self.name, key) in self.table

    def __getitem__(self, key):
        return self.table[self.name, key]

    def __setitem__(self, key, config):
        self.table[self.name, key] = config


class OwnKeyTuner(Autotuner):
    """Benchmarks every surviving config (one included) under its own key, kept in its own cache."""

    def __init__(self, fn, configs, key):
        super().__init__(fn, fn.arg_names, configs, key, None, None)
        self.cache = PersistentConfigs(f"{self.base_fn.__name__}_{self.kernel_hash}")

    @property
    def kernel_hash(self):
        jit = self.fn
        while not isinstance(jit, triton.runtime.JITFunction):
            jit = jit.fn
        return jit.cache_key[:16]

    def run(self, *args, **kwargs):
        self.nargs = dict(zip(self.arg_names, args))
        key = tuple(self.nargs[k] for k in self.keys)
        if key not in self.cache:
            timings = {c: self._bench(*args, config=c, **kwargs) for c in self.prune_configs(kwargs)}
            self.cache[key] = min(timings, key=timings.get)
        self.best_config = self.cache[key]
        return self.fn.run(*args, **kwargs, **self.best_config.all_kwargs())


def tuned_scale():
    return OwnKeyTuner(scale_kernel, [triton.Config({"BLOCK": b}) for b in (32, 8)], key=["n"])


def tuned_scale_launch(tuner, x, scale=2.0):
    out = torch.empty_like(x)
    tuner[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, out, x.numel(), scale)
    return out


# -- code generated at import (FlagGems' pointwise_dynamic) --------------------------------------

_HELPER = '''
import triton  # not triton.language: this module only defines the scalar function


@triton.jit
def {name}(x):
    return {expression}
'''

_KERNEL = '''
import triton
{language}


@triton.jit
def {name}(x_ptr, out_ptr, n, BLOCK: {constexpr}):
    offs = triton.language.program_id(0) * BLOCK + triton.language.arange(0, BLOCK)
    mask = offs < n
    x = triton.language.load(x_ptr + offs, mask=mask)
    triton.language.store(out_ptr + offs, {helper}(x), mask=mask)
'''


def _load(name, source):
    path = os.path.join(tempfile.mkdtemp(prefix="compat-generated-"), f"{name}.py")
    with open(path, "w") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location(f"_generated_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def generate(name, expression, spell_out=False):
    """A pointwise kernel written as source text: a scalar function in one generated module, checked to
    be a JITFunction, and a kernel in another that calls it (given the function through its globals).

    ``spell_out``: no scalar function; the kernel computes ``expression`` itself in a module that imports
    only ``triton`` and annotates its block ``triton.language.constexpr``.
    """
    if spell_out:
        source = _KERNEL.format(name=name, helper="", language="", constexpr="triton.language.constexpr")
        kernel = getattr(_load(name, source.replace("(x), mask", f"({expression}), mask")), name)
        assert isinstance(kernel, triton.runtime.jit.JITFunction), f"{name} is not a JITFunction"
        return kernel
    helper = getattr(_load(f"{name}_scalar", _HELPER.format(name=f"{name}_scalar", expression=expression)),
                     f"{name}_scalar")
    assert isinstance(helper, triton.runtime.jit.JITFunction), f"{helper.__name__} is not a JITFunction"
    source = _KERNEL.format(name=name, helper=helper.__name__, language="import triton.language as tl",
                            constexpr="tl.constexpr")
    module = _load(name, source)
    module.__dict__[helper.__name__] = helper
    return getattr(module, name)


def generated_launch(kernel, x):
    out = torch.empty_like(x)
    kernel[(triton.cdiv(x.numel(), 16),)](x, out, x.numel(), BLOCK=16)
    return out


# -- a tensor-like wrapper (FlagGems' StridedBuffer) ----------------------------------------------


class StridedView:
    """A view with its own shape and strides over a tensor's memory (negative strides included)."""

    def __init__(self, base, shape, strides, offset=0):
        self.base, self.shape, self._strides = base, tuple(shape), tuple(strides)
        self.dtype, self.device = base.dtype, base.device
        self._data_ptr = base.data_ptr() + offset * base.element_size()

    def data_ptr(self):
        return self._data_ptr

    def stride(self):
        return self._strides

    def untyped_storage(self):
        return self.base.untyped_storage()


@triton.jit
def strided_copy_kernel(x_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs * stride, mask=mask), mask=mask)


def reversed_copy(x):
    """x[::-1] through a view with stride -1 (torch has no negative strides)."""
    view = StridedView(x, x.shape, (-1,), offset=x.numel() - 1)
    out = torch.empty_like(x)
    strided_copy_kernel[(1,)](view, out, x.numel(), view.stride()[0], BLOCK=triton.next_power_of_2(x.numel()))
    return out


# -- the softmax tutorial's occupancy query --------------------------------------------------------


@triton.jit
def rows_copy_kernel(out_ptr, in_ptr, n_rows, n_cols, BLOCK: tl.constexpr, STAGES: tl.constexpr):
    for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0), num_stages=STAGES):
        cols = tl.arange(0, BLOCK)
        tl.store(out_ptr + row * n_cols + cols, tl.load(in_ptr + row * n_cols + cols, mask=cols < n_cols),
                 mask=cols < n_cols)


def occupancy_launch(x):
    """Sizes a persistent grid from the warmed-up kernel's registers and shared memory, as tutorial 02 does."""
    props = triton.runtime.driver.active.utils.get_device_properties(0)
    out = torch.empty_like(x)
    n_rows, n_cols = x.shape
    block = triton.next_power_of_2(n_cols)
    kernel = rows_copy_kernel.warmup(out, x, n_rows, n_cols, BLOCK=block, STAGES=2, num_warps=8, grid=(1,))
    kernel._init_handles()
    occupancy = min(props["max_num_regs"] // (kernel.n_regs * props["warpSize"] * 8),
                    props["max_shared_mem"] // kernel.metadata.shared)
    programs = min(props["multiprocessor_count"] * occupancy, n_rows)
    kernel[(programs, 1, 1)](out, x, n_rows, n_cols, block, 2)
    return out, programs


# -- the vendor probe (FlagGems' DeviceDetector) and torch.hip (older liger-kernel) ----------------


def vendor():
    """The first vendor whose tool answers, as FlagGems finds it at import."""
    for name, tool in (("nvidia", ["nvidia-smi"]), ("amd", ["rocm-smi"])):
        try:
            if subprocess.run(tool, capture_output=True, text=True).returncode == 0:
                return name
        except OSError:
            pass
    raise RuntimeError("No device were detected on your machine")


def block_for_platform():
    """A block size by platform, decided with torch.hip as older liger-kernel's utils do."""
    return 64 if torch.hip.is_available() else 32

