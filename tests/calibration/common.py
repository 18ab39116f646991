"""What every calibration subject shares: the dtypes, the dims, the value classes."""

from triton_conformance import Dim, Scalar

DTYPES = ("float16", "bfloat16", "float32")
ROWS = Dim(1, 4096)
COLUMNS = Dim(1, 4096)
# Every value class torch computes as float64 would, rounded: claimed, so each gets its cell.
VALUES = ("huge", "inf", "nan", "denormal", "ties")
# Less "inf", for the ops whose CPU kernels do not propagate infinities as float64 does (seen at
# nightly seed 3618053650): layer_norm gives -inf where the row's mean is inf - inf (NaN); matmul's
# blocked kernel gives NaN for a -inf sum (inf times a padding zero); gelu gives NaN for gelu(inf) = inf.
FINITE_VALUES = ("huge", "nan", "denormal", "ties")
# torch's CPU log_softmax (and cross_entropy, built on it) rounds the sum of exponentials to the
# input dtype for fp16 and bf16 inputs: 1.2% off at log(1.03) in fp16.  Its honest declaration.
ROUNDS_TO_INPUT = {"float16": "float16", "bfloat16": "bfloat16"}
EPS = Scalar(1e-6, 1e-3)
