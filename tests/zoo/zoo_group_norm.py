"""Buggy group norms.  Each claims the contract of ``kernels_under_test.group_norm.group_norm``,
whose dims are related: C % G == 0, with G handed to the launcher by keyword."""

from kernels_under_test.group_norm import GROUP_NORM_CONTRACT, check_group_norm_args, launch_group_norm
from triton_conformance import subject

BUGS = [
    ("zoo_group_norm_mask_at_c", "shape:non-pow2", "wrong", "mismatch"),
]


@subject(**GROUP_NORM_CONTRACT, name="zoo_group_norm_mask_at_c",
         xfail="the channel tile is masked at C, not at the group's end: with Cg no power of two a group's "
               "statistics take in the next group's first channels")
def zoo_group_norm_mask_at_c(x, weight, bias, eps, G):
    """Bug: right whenever C // G is a power of two (the tile is then exactly the group), wrong otherwise
    for every group but the last."""
    check_group_norm_args(x, weight, bias, eps, G, "zoo_group_norm_mask_at_c")
    return launch_group_norm(x, weight, bias, eps, G, mask_at_group_end=False)
