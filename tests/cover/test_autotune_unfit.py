"""A pinned autotune config that does not fit the device is skipped, as Triton's autotuner skips it; a kernel
none of whose configs fit is a compile-error.

The interpreter compiles nothing, so the device is faked: the kernel's ``run`` raises ``OutOfResources`` for
blocks past a shared-memory limit (launch and warm-up alike), as a CUDA kernel's first load does.
"""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # before any @triton.jit below is defined

import pytest  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.runtime.errors import OutOfResources  # noqa: E402

from triton_conformance import Dim, Tensor, subject  # noqa: E402
from triton_conformance.conformance.runner import run_cell  # noqa: E402
from triton_conformance.model.config import run_config  # noqa: E402
from triton_conformance.workers.executor import classify  # noqa: E402

pytestmark = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="runs kernels on the interpreter")

CI = run_config(profile="ci")
CONFIGS = [triton.Config({"BLOCK": b}, num_warps=w) for b, w in ((16, 1), (32, 2), (64, 4), (128, 4))]
BYTES_PER_LANE = 1024  # the fake kernel's shared memory: BLOCK lanes of 1 KiB each


@triton.autotune(configs=CONFIGS, key=["n"])
@triton.jit
def double_blocks(out_ptr, x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


@subject(inputs={"x": Tensor(("N",), dtypes=("float32",))}, dims={"N": Dim(1, 200)}, oracle=lambda x: x * 2,
         family="cover_autotune_unfit")
def cover_autotune_unfit(x):
    out = torch.empty_like(x)
    double_blocks[lambda meta: (triton.cdiv(x.shape[0], meta["BLOCK"]),)](out, x, x.shape[0])
    return out


@pytest.fixture
def shared_memory(monkeypatch):
    """Set the fake device's shared memory (bytes): a config whose block needs more raises OutOfResources."""
    real = type(double_blocks.fn).run.__get__(double_blocks.fn)
    limit = {}

    def run(*args, **kwargs):
        required = kwargs["BLOCK"] * BYTES_PER_LANE
        if required > limit["bytes"]:
            raise OutOfResources(required, limit["bytes"], "shared memory")
        return real(*args, **kwargs)

    monkeypatch.setitem(double_blocks.fn.__dict__, "run", run)
    return lambda n: limit.__setitem__("bytes", n)


def test_a_pinned_config_that_does_not_fit_is_skipped_naming_the_config_and_the_resource(shared_memory):
    shared_memory(64 * BYTES_PER_LANE)  # BLOCK=128 does not fit; the other three do
    unfit = run_cell(cover_autotune_unfit, "autotune:config3", config=CI)
    assert unfit.outcome == "skipped", unfit.message
    assert unfit.details["skip_code"] == "discard:out-of-resources"
    assert unfit.message.startswith("config BLOCK=128,num_warps=4,num_stages=3: ")
    assert "out of shared memory, required 131072, limit 65536" in unfit.message
    assert "Triton's autotuner skips it" in unfit.message
    assert unfit.details["out-of-resources_discarded"] > 0
    fits = run_cell(cover_autotune_unfit, "autotune:config2", config=CI)
    assert fits.outcome == "honoured" and "out_of_resources" not in fits.details, fits.message
    # The tuning benchmark (both orders) skips it by itself (Autotuner._bench): not discarded, the rest is judged.
    for cell in ("autotune:benchmark", "autotune:order"):
        assert run_cell(cover_autotune_unfit, cell, config=CI).outcome == "honoured", cell


def test_a_kernel_none_of_whose_configs_fit_is_a_compile_error(shared_memory):
    shared_memory(8 * BYTES_PER_LANE)  # not even BLOCK=16
    for cell in ("autotune:config3", "autotune:config0", "autotune:benchmark"):
        result = classify(run_cell(cover_autotune_unfit, cell, config=CI))
        assert (result.outcome, result.finding) == ("compile-error", "out-of-resources"), (cell, result.message)
        assert "Required: 131072" in result.details["traceback"] or cell != "autotune:config3"
