"""What every calibration subject shares: the dtypes, the dims, the value classes."""

from triton_conformance import Dim, Scalar

DTYPES = ("float16", "bfloat16", "float32")
ROWS = Dim(1, 4096)
COLUMNS = Dim(1, 4096)
# Every value class torch computes as float64 would, rounded: claimed, so each gets its cell.
VALUES = ("huge", "inf", "nan", "denormal", "ties")
EPS = Scalar(1e-6, 1e-3)
