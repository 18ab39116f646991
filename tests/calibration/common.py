"""What every calibration subject shares: the dtypes, the dims, the value classes."""

from triton_conformance import Dim, Scalar

DTYPES = ("float16", "bfloat16", "float32")
ROWS = Dim(1, 4096)
COLUMNS = Dim(1, 4096)
# Every value class torch computes as float64 would, rounded: claimed, so each gets its cell.
VALUES = ("huge", "inf", "nan", "denormal", "ties")
# Less "inf", for the ops whose CPU kernels do not propagate infinities as float64 does (seen at
# nightly seed 3618053650): gelu(inf) is NaN in fp16, bf16 and fp32 (inf in float64); layer_norm with
# an infinite weight or bias gives -inf where float64's x_hat * w is 0 * inf = NaN.
FINITE_VALUES = ("huge", "nan", "denormal", "ties")
# What torch's CPU kernels round to the input dtype for fp16 and bf16 inputs, declared as a user
# would (measured against float64 with /tmp-style surveys: the error is 5-500 times what fp32
# intermediates give): log_softmax's sum of exponentials (1.2% off at log(1.03) in fp16), and so
# cross_entropy's; the backwards of softmax and layer_norm.
ROUNDS_TO_INPUT = {"float16": "float16", "bfloat16": "bfloat16"}
EPS = Scalar(1e-6, 1e-3)
