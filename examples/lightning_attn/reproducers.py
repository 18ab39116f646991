"""The shrunk reproducers of lightning-attn 0.0.5's bugs, as the suite reported them (FINDINGS.md).

Run from this folder:  python reproducers.py   (torch, triton, lightning-attn and this package installed)
Each replay re-runs the example under the cell's guards (guard bands around the outputs) and raises
AssertionError with the finding while the bug is there; this script prints each finding and goes on.
"""
import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported

from triton_conformance.conformance.replay import replay
from triton_conformance.strategies import Spec

CASES = [
    # bug 3: unmasked value-dim tile.  e = 3 -> BLOCK_MODEL = 4: column 3 of every row is read from v
    # and written to o, i.e. the next row's first element, and past the end of o for the last row.
    ("lightning_attn2_decay[layout:contiguous]: unsafe (oob-write)", "lightning_attn2_decay",
     Spec(dims={'n': 1, 'b': 1, 'h': 1, 'd': 64, 'e': 3, 'one': 1, 'one2': 1},
          dtypes={'q': 'bfloat16', 'k': 'bfloat16', 'v': 'bfloat16', 's': 'float32'}, layouts={},
          seed=810827121)),
    ("lightning_attn2_nodecay[layout:contiguous]: unsafe (oob-write)", "lightning_attn2_nodecay",
     Spec(dims={'n': 1, 'b': 1, 'h': 1, 'd': 64, 'e': 3},
          dtypes={'q': 'float16', 'k': 'float16', 'v': 'float16'}, layouts={}, seed=0)),
    # bug 2: is_support(16) == 16 % 16 == 0: the front door's assert refuses head dim 16.
    ("lightning_attn_func_decay[layout:contiguous]: crash (AssertionError in contract)", "lightning_attn_func_decay",
     Spec(dims={'n': 1, 'b': 1, 'h': 1, 'd': 16, 'e': 16, 'one': 1, 'one2': 1},
          dtypes={'q': 'float32', 'k': 'float32', 'v': 'float32', 's': 'float32'}, layouts={}, seed=0)),
    # bug 1 (d = 32 passes the inverted assert, then the no-decay branch uses q1, k1: UnboundLocalError).
    ("lightning_attn_func_nodecay at d = e = 32: crash (UnboundLocalError)", "lightning_attn_func_nodecay",
     Spec(dims={'n': 4, 'b': 1, 'h': 1, 'd': 32, 'e': 32},
          dtypes={'q': 'float32', 'k': 'float32', 'v': 'float32'}, layouts={}, seed=0)),
    # bug 1 alone, at the library example's d = e = 64 (its own subject, no bug 2 in the way).
    ("lightning_attn_func_nodecay_d64[layout:contiguous]: crash (UnboundLocalError)", "lightning_attn_func_nodecay_d64",
     Spec(dims={'n': 1, 'b': 1, 'h': 1, 'd': 64, 'e': 64},
          dtypes={'q': 'float32', 'k': 'float32', 'v': 'float32'}, layouts={}, seed=0)),
    # bug 4: int32 row offsets in srms_norm_fw; the large-index example: x (16647192, 129) fp16, lazily
    # allocated, the last programs of the grid run: row * stride wraps, their stores land 2^32 elements early.
    ("lightning_srmsnorm[shape:large-index]: unsafe (oob-write)", "lightning_srmsnorm", "large-index"),
]

if __name__ == "__main__":
    for title, name, spec in CASES:
        print("==", title)
        try:
            if spec == "large-index":
                replay("lightning_subjects", name, "shape:large-index", device="cpu")
            else:
                replay("lightning_subjects", name, "layout:contiguous", spec, device="cpu")
            print("   not reproduced")
        except AssertionError as exc:
            print("   reproduced:", str(exc).splitlines()[0][:300])
        except Exception as exc:  # noqa: BLE001 - a crash is the finding
            print("   reproduced:", type(exc).__name__, str(exc)[:300])
