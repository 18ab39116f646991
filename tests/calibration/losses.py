"""``cross_entropy`` with an ignore index, mean-reduced and per row."""

import torch.nn.functional as F

from tests.calibration.common import DTYPES, ROUNDS_TO_INPUT, VALUES
from triton_conformance import Backward, Dim, Tensor, subject

IGNORE = -100
INPUTS = {"logits": Tensor(("M", "V"), dtypes=DTYPES, layouts="any"),
          "target": Tensor(("M",), dtypes=("int64",), layouts="any", index_of="V", special=(IGNORE,))}
DIMS = {"M": Dim(1, 2048), "V": Dim(1, 8192)}


def cross_entropy(logits, target):
    return F.cross_entropy(logits, target, ignore_index=IGNORE)


@subject(inputs=INPUTS, dims=DIMS, family="torch_cross_entropy", oracle=cross_entropy, reduces="V",
         values=VALUES, accumulate=ROUNDS_TO_INPUT, backward=Backward(grads=("logits",), output=()))
def torch_cross_entropy(logits, target):
    """F.cross_entropy with ignore_index=-100, the mean over the rows not ignored."""
    return cross_entropy(logits, target)


def cross_entropy_per_row(logits, target):
    return F.cross_entropy(logits, target, ignore_index=IGNORE, reduction="none")


@subject(inputs=INPUTS, dims=DIMS, family="torch_cross_entropy", oracle=cross_entropy_per_row, reduces="V",
         values=VALUES, accumulate=ROUNDS_TO_INPUT, backward=Backward(grads=("logits",), output=("M",)))
def torch_cross_entropy_per_row(logits, target):
    """F.cross_entropy with ignore_index=-100, one loss per row."""
    return cross_entropy_per_row(logits, target)


SUBJECTS = (torch_cross_entropy, torch_cross_entropy_per_row)
