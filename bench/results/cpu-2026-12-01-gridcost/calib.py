"""Fit seconds ~ a*handles + b*elements + c*programs + d*launches on synthetic interpreted kernels."""
import os, sys, time, json
os.environ["TRITON_INTERPRET"] = "1"
import numpy as np, torch, triton, triton.language as tl
from triton.runtime import interpreter as I

@triton.jit
def add_k(x, y, o, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(o + offs, tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)

@triton.jit
def softmax_k(x, o, n, BLOCK: tl.constexpr):
    r = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(x + r * n + offs, mask=m, other=-float("inf")).to(tl.float32)
    v = v - tl.max(v, 0)
    e = tl.exp(v)
    tl.store(o + r * n + offs, e / tl.sum(e, 0), mask=m)

@triton.jit
def loop_k(x, o, n, BLOCK: tl.constexpr):
    r = tl.program_id(0)
    acc = tl.zeros((BLOCK,), tl.float32)
    for s in range(0, n, BLOCK):
        offs = s + tl.arange(0, BLOCK)
        acc += tl.load(x + r * n + offs, mask=offs < n, other=0.0)
    tl.store(o + r, tl.sum(acc, 0))

@triton.jit
def dot_k(a, b, c, B: tl.constexpr):
    i = tl.arange(0, B)
    x = tl.load(a + i[:, None] * B + i[None, :])
    y = tl.load(b + i[:, None] * B + i[None, :])
    tl.store(c + tl.program_id(0) * B * B + i[:, None] * B + i[None, :], tl.dot(x, y))

@triton.jit
def _comb(a, b):
    return a + b

@triton.jit
def _helper(v):
    return v * 2.0 + 1.0

@triton.jit
def red_k(x, o, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    v = tl.load(x + tl.program_id(0) * BLOCK + offs)
    tl.store(o + tl.program_id(0), tl.reduce(v, 0, _comb))

@triton.jit
def helper_k(x, o, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + offs)
    tl.store(o + offs, _helper(_helper(v)))

class Count:
    def __init__(s): s.h = s.e = s.p = s.l = s.c = 0
C = Count()
pi, sd, si = I.TensorHandle.__post_init__, I.InterpreterBuilder.set_grid_dim, I.InterpreterBuilder.set_grid_idx
def p2(self):
    pi(self); C.h += 1; C.e += getattr(self.data, "size", 1)
def d2(self, *a):
    C.l += 1; return sd(self, *a)
def i2(self, *a):
    C.p += 1; return si(self, *a)
I.TensorHandle.__post_init__, I.InterpreterBuilder.set_grid_dim, I.InterpreterBuilder.set_grid_idx = p2, d2, i2
pl = I._patch_lang
def pl2(fn):
    C.c += 1; return pl(fn)
I._patch_lang = pl2

rows = []
def measure(name, fn, reps=3):
    fn()  # warm
    best = None
    for _ in range(reps):
        C.__init__(); t = time.perf_counter(); fn(); dt = time.perf_counter() - t
        best = dt if best is None or dt < best else best
    rows.append((name, C.h, C.e, C.p, C.l, C.c, best))
    print(f"{name:28s} h={C.h:8d} e={C.e:10d} p={C.p:6d} l={C.l} c={C.c:6d} {best*1e3:9.2f} ms", flush=True)

for BLOCK in (1, 16, 256, 4096):
    for progs in (16, 256):
        n = BLOCK * progs
        x, y, o = torch.randn(n), torch.randn(n), torch.empty(n)
        measure(f"add B={BLOCK} P={progs}", lambda: add_k[(progs,)](x, y, o, n, BLOCK=BLOCK))
for BLOCK in (1, 32, 1024):
    for progs in (16, 256):
        x = torch.randn(progs, BLOCK); o = torch.empty_like(x)
        measure(f"softmax B={BLOCK} P={progs}", lambda: softmax_k[(progs,)](x, o, BLOCK, BLOCK=BLOCK))
for BLOCK, n in ((16, 1024), (256, 8192), (1024, 1024)):
    x = torch.randn(8, n); o = torch.empty(8)
    measure(f"loop B={BLOCK} n={n}", lambda: loop_k[(8,)](x, o, n, BLOCK=BLOCK))
for B in (16, 64):
    a = torch.randn(B, B); b = torch.randn(B, B); c = torch.empty(16, B, B)
    measure(f"dot B={B}", lambda: dot_k[(16,)](a, b, c, B=B))
for B in (16, 128):
    x = torch.randn(8 * B); o = torch.empty(8)
    measure(f"reduce-custom B={B}", lambda: red_k[(8,)](x, o, BLOCK=B))
for B, P in ((1, 256), (256, 64)):
    x = torch.randn(P * B); o = torch.empty_like(x)
    measure(f"helper B={B} P={P}", lambda: helper_k[(P,)](x, o, BLOCK=B))
x = torch.randn(1 << 20); y = torch.randn(1 << 20); o = torch.empty(1 << 20)
measure("add big-storage P=1 B=16", lambda: add_k[(1,)](x, y, o, 16, BLOCK=16))
json.dump(rows, open(sys.argv[1] if len(sys.argv) > 1 else "/tmp/gridcost/calib.json", "w"))
A = np.array([[r[1], r[2], r[3], r[4], r[5]] for r in rows], float); t = np.array([r[6] for r in rows])
# relative least squares
w = 1 / t
coef, *_ = np.linalg.lstsq(A * w[:, None], t * w, rcond=None)
print("s/handle %.3g  s/elem %.3g  s/program %.3g  s/launch %.3g s/patch %.3g" % tuple(coef))
print("in handles: elem %.5f program %.2f launch %.1f patch %.2f" % (coef[1]/coef[0], coef[2]/coef[0], coef[3]/coef[0], coef[4]/coef[0]))
for r, a in zip(rows, A):
    print(f"{r[0]:28s} fit {a @ coef * 1e3:9.2f} ms  got {r[6]*1e3:9.2f}")
