"""One-off probe of the GPU machine's Triton/torch behaviour that the nightly mode relies on.

Writes what it finds to stdout; run on the device with PYTHONUNBUFFERED=1.
"""
import inspect
import os
import subprocess
import sys
import textwrap
import time

import torch
import triton
import triton.language as tl

print("torch", torch.__version__, "triton", triton.__version__, "gpus", torch.cuda.device_count())
for mod in ("pytest", "xdist", "hypothesis", "pytest_benchmark", "allure_pytest"):
    try:
        m = __import__(mod)
        print(mod, getattr(m, "__version__", "?"))
    except Exception as exc:
        print(mod, "MISSING", exc)
for tool in ("compute-sanitizer", "/usr/local/cuda/bin/compute-sanitizer", "nvcc", "nvidia-smi"):
    print(tool, subprocess.run(f"command -v {tool} || ls {tool}", shell=True, capture_output=True, text=True).stdout.strip())
print(subprocess.run("ls /usr/local/cuda*/bin 2>/dev/null | head -50; find / -name 'compute-sanitizer*' -maxdepth 6 2>/dev/null | head", shell=True, capture_output=True, text=True).stdout)

from triton import knobs
print("runtime knobs:", [k for k in dir(knobs.runtime) if not k.startswith("_")])
from triton.runtime import jit
src = inspect.getsource(jit.JITFunction)
for needle in ("jit_cache_hook", "jit_post_compile_hook", "_call_hook"):
    for i, line in enumerate(src.splitlines()):
        if needle in line:
            print("jit.py:", line.strip())
print(textwrap.indent(inspect.getsource(jit.JITFunction._call_hook), "  ") if hasattr(jit.JITFunction, "_call_hook") else "no _call_hook")
try:
    from triton.runtime import errors
    print("runtime errors:", [n for n in dir(errors) if not n.startswith("_")])
except Exception as exc:
    print("errors import", exc)
import triton.compiler.errors as cerr
print("compiler errors:", [n for n in dir(cerr) if not n.startswith("_")])
try:
    print(textwrap.indent(inspect.getsource(triton.runtime.jit.specialize_impl if hasattr(triton.runtime.jit, "specialize_impl") else triton.backends.nvidia.driver), "  ")[:3000])
except Exception as exc:
    print("specialize src", exc)

# hook signature and specialization behaviour
seen = []
def cache_hook(*a, **k):
    seen.append(("cache", sorted(k)))
    return False
def post_hook(*a, **k):
    seen.append(("post", sorted(k)))
knobs.runtime.jit_cache_hook = cache_hook
knobs.runtime.jit_post_compile_hook = post_hook

@triton.jit
def copy_kernel(x_ptr, y_ptr, n, stride, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs * stride, mask=m), mask=m)

for n, stride in [(100, 1), (101, 1), (112, 1), (128, 2), (1, 1), (17, 3), (32, 16), (33, 17)]:
    x = torch.randn(n * stride, device="cuda"); y = torch.empty(n, device="cuda")
    before = len(seen)
    copy_kernel[(triton.cdiv(n, 64),)](x, y, n, stride, BLOCK=64)
    torch.cuda.synchronize()
    print(f"n={n} stride={stride} hooks={seen[before:]}")
print("cache_hook first kwargs:", seen[0] if seen else None)
def cache_hook2(*a, **k):
    print("  cache_hook kwargs sample:", {kk: (str(v)[:200]) for kk, v in k.items()})
    return False
knobs.runtime.jit_cache_hook = cache_hook2
x = torch.randn(77, device="cuda"); y = torch.empty(77, device="cuda")
copy_kernel[(2,)](x, y, 77, 5, BLOCK=64)
knobs.runtime.jit_cache_hook = None
knobs.runtime.jit_post_compile_hook = None

# a cache hook returning True: what happens to the launch?
flag = {}
def skip_hook(*a, **k):
    flag["called"] = True
    return True
knobs.runtime.jit_cache_hook = skip_hook
y = torch.full((77,), -1.0, device="cuda")
try:
    r = copy_kernel[(2,)](x, y, 77, 7, BLOCK=64)
    torch.cuda.synchronize()
    print("skip hook: returned", r, "output untouched:", bool((y == -1).all()), flag)
except Exception as exc:
    print("skip hook raised", type(exc).__name__, exc)
knobs.runtime.jit_cache_hook = None
def raise_hook(*a, **k):
    raise RuntimeError("budget exhausted")
knobs.runtime.jit_cache_hook = raise_hook
try:
    copy_kernel[(2,)](x, y, 77, 9, BLOCK=64)
    print("raise hook: no exception")
except Exception as exc:
    print("raise hook: propagated", type(exc).__name__, exc)
knobs.runtime.jit_cache_hook = None

# out of shared memory
@triton.jit
def big_dot(a_ptr, c_ptr, BLOCK: tl.constexpr):
    r = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + r[:, None] * BLOCK + r[None, :])
    c = tl.dot(a, a)
    tl.store(c_ptr + r[:, None] * BLOCK + r[None, :], c)
a = torch.randn(512, 512, device="cuda"); c = torch.empty_like(a)
try:
    big_dot[(1,)](a, c, BLOCK=512)
    torch.cuda.synchronize()
    print("big dot compiled fine")
except Exception as exc:
    print("big dot:", type(exc).__module__, type(exc).__name__, str(exc)[:500])

# compile error
@triton.jit
def bad_kernel(x_ptr, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK < 16, "BLOCK too big")
    tl.store(x_ptr, 1.0)
try:
    bad_kernel[(1,)](a, BLOCK=32)
except Exception as exc:
    print("static_assert:", type(exc).__module__, type(exc).__name__, str(exc)[:300])

# tl.rand on CUDA and speed
@triton.jit
def rand_kernel(o_ptr, n, seed, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(o_ptr + offs, tl.rand(seed, offs), mask=offs < n)
o = torch.empty(10_000_000, device="cuda")
rand_kernel[(triton.cdiv(o.numel(), 1024),)](o, o.numel(), 123, BLOCK=1024)
torch.cuda.synchronize()
print("tl.rand mean", o.mean().item(), "ms", triton.testing.do_bench(lambda: rand_kernel[(triton.cdiv(o.numel(), 1024),)](o, o.numel(), 123, BLOCK=1024)))

# peaks
big = torch.empty(2 * 1024**3 // 4, device="cuda")
ms = triton.testing.do_bench(lambda: big.copy_(big.flip(0)) if False else torch.empty_like(big).copy_(big))
print("copy GB/s (read+write)", 2 * big.numel() * 4 / ms / 1e6)
for dt in (torch.float16, torch.bfloat16, torch.float32):
    A = torch.randn(8192, 8192, device="cuda", dtype=dt)
    ms = triton.testing.do_bench(lambda: A @ A)
    print("matmul", dt, "TFLOP/s", 2 * 8192**3 / ms / 1e9)
print("allow_tf32", torch.backends.cuda.matmul.allow_tf32)
del big

# illegal memory access in a child: text, and whether the context survives
child = r'''
import torch, triton, triton.language as tl
@triton.jit
def wild(x_ptr):
    tl.store(x_ptr + 1 << 40, 1.0)
x = torch.zeros(4, device="cuda")
try:
    wild[(1,)](x); torch.cuda.synchronize(); print("no error")
except Exception as exc:
    print("first:", type(exc).__module__, type(exc).__name__, str(exc)[:300])
try:
    torch.zeros(1, device="cuda").sum().item(); print("context still usable")
except Exception as exc:
    print("after:", type(exc).__name__, str(exc)[:200])
'''
r = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120)
print("IMA child rc", r.returncode, r.stdout, r.stderr[-800:])
child2 = r'''
import torch, triton, triton.language as tl
@triton.jit
def asserting(x_ptr):
    v = tl.load(x_ptr)
    tl.device_assert(v > 0, "v must be positive")
x = torch.zeros(4, device="cuda")
try:
    asserting[(1,)](x); torch.cuda.synchronize(); print("no error")
except Exception as exc:
    print("first:", type(exc).__module__, type(exc).__name__, str(exc)[:300])
'''
r = subprocess.run([sys.executable, "-c", child2], capture_output=True, text=True, timeout=120, env={**os.environ, "TRITON_DEBUG": "1"})
print("assert child rc", r.returncode, r.stdout, r.stderr[-800:])

# big allocation for the large-index cell
t0 = time.time()
xb = torch.empty(2**31 + 4096, dtype=torch.float16, device="cuda")
print("2^31 fp16 alloc ok", xb.numel(), time.time() - t0)
