"""The magnitude rule of dense linear algebra (oracles/magnitude_linalg.py): a backward-stable op's result
is allowed its inputs' backward error carried through the op, so a correct fp32 solve of an ill-conditioned
system passes where the plain bound fails it, and a solve that pivots wrongly or drops a term still fails."""

import torch

from triton_conformance.oracles.comparison import compare
from triton_conformance.oracles.magnitude import output_magnitudes
from triton_conformance.oracles.tolerance import default_bound


def _ill_conditioned(n=24, condition=1e5, seed=0):
    """A float32-representable matrix with singular values from 1 down to 1/condition."""
    g = torch.Generator().manual_seed(seed)
    q1, _ = torch.linalg.qr(torch.randn(n, n, generator=g, dtype=torch.float64))
    q2, _ = torch.linalg.qr(torch.randn(n, n, generator=g, dtype=torch.float64))
    s = torch.logspace(0, -torch.log10(torch.tensor(condition)).item(), n, dtype=torch.float64)
    b = torch.randn(n, 3, generator=g, dtype=torch.float64)
    return (q1 @ torch.diag(s) @ q2.T).float().double(), b.float().double()


def _judge(got, oracle, inputs, conditioned=True):
    """``compare`` as the judge calls it for an fp32 claim: the plain bound, then the magnitudes."""
    ref = oracle(**inputs)
    bound = default_bound(out_dtype="float32", accumulate="float32", scale=float(ref.abs().max()))
    magnitude = (lambda: output_magnitudes(oracle, inputs, {})[0]) if conditioned else None
    return compare(got, ref, bound, magnitude=magnitude)


def _solve(a, b):
    return torch.linalg.solve(a, b)


def _solve_without_pivoting(a, b):
    """Gaussian elimination in the input's dtype that takes the diagonal as the pivot, whatever its size."""
    a, b = a.clone(), b.clone()
    n = a.shape[0]
    for k in range(n - 1):
        factors = a[k + 1:, k:k + 1] / a[k, k]
        a[k + 1:] -= factors * a[k]
        b[k + 1:] -= factors * b[k]
    return torch.linalg.solve_triangular(a.triu(), b, upper=True)


def test_a_correct_fp32_solve_of_an_ill_conditioned_system_passes_through_its_magnitudes():
    a, b = _ill_conditioned()
    got = torch.linalg.solve(a.float(), b.float())
    assert _judge(got, _solve, {"a": a, "b": b}, conditioned=False) is not None, "the plain bound fails it"
    assert _judge(got, _solve, {"a": a, "b": b}) is None


def test_a_solve_that_pivots_on_a_tiny_diagonal_fails():
    a, b = _ill_conditioned(condition=10.0, seed=1)
    a[0, 0] = 2.0**-20  # a tiny first pivot: partial pivoting swaps it away, this kernel divides by it
    mismatch = _judge(_solve_without_pivoting(a.float(), b.float()), _solve, {"a": a, "b": b})
    assert mismatch is not None and "elements outside tolerance" in mismatch.message
    assert _judge(torch.linalg.solve(a.float(), b.float()), _solve, {"a": a, "b": b}) is None  # its twin


def test_a_triangular_solve_that_drops_a_term_fails():
    a, b = _ill_conditioned(n=16, condition=10.0, seed=2)
    upper = a.triu() + 4 * torch.eye(16, dtype=torch.float64)

    def oracle(u, b):
        return torch.linalg.solve_triangular(u, b, upper=True)

    dropped = upper.float().clone()
    dropped[3, 9] = 0.0  # one term of the back substitution left out
    assert _judge(torch.linalg.solve_triangular(dropped, b.float(), upper=True), oracle,
                  {"u": upper, "b": b}) is not None
    assert _judge(torch.linalg.solve_triangular(upper.float(), b.float(), upper=True), oracle,
                  {"u": upper, "b": b}) is None


def test_lu_at_a_pivot_tied_within_rounding_allows_either_choice_and_not_a_wrong_one():
    g = torch.Generator().manual_seed(3)
    a = torch.randn(6, 6, generator=g, dtype=torch.float64)
    a[:, 0] *= 0.1
    a[0, 0], a[1, 0] = 1.0, -(1.0 + 2.0**-30)  # the largest of column 0: float64 pivots on row 1; in fp32 the two are equal: row 0

    def oracle(a):
        return torch.linalg.lu_factor(a)[0]

    got = torch.linalg.lu_factor(a.float())[0]
    assert (got.double() - oracle(a)).abs().max() > 0.5, "the two choices give different factors"
    assert _judge(got, oracle, {"a": a}) is None
    a[1, 0] = -1.25  # no tie: a kernel that keeps row 0 as its first pivot is wrong
    assert _judge(_lu_without_pivoting(a.float()), oracle, {"a": a}) is not None
    assert _judge(torch.linalg.lu_factor(a.float())[0], oracle, {"a": a}) is None  # its twin


def _lu_without_pivoting(a):
    """LU packed as lu_factor packs it (L's multipliers below the diagonal, U on and above), every pivot
    taken on the diagonal."""
    a = a.clone()
    for k in range(a.shape[0] - 1):
        a[k + 1:, k] /= a[k, k]
        a[k + 1:, k + 1:] -= a[k + 1:, k:k + 1] * a[k, k + 1:]
    return a


def _rows_alike(seed, shape=(56, 55)):
    """Every row the same (what a stride-0 layout makes of a matrix): rank 1."""
    row = torch.randn(1, shape[1], generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return row.float().double().expand(*shape).contiguous()


def test_qr_of_a_rank_deficient_matrix_allows_any_basis_of_its_null_space_and_still_checks_r():
    def q_of(a):
        return torch.linalg.qr(a)[0]

    def r_of(a):
        return torch.linalg.qr(a)[1]

    def tau_of(a):
        return torch.geqrf(a)[1]

    a = _rows_alike(1)
    q, r = torch.linalg.qr(a.float())
    assert _judge(q, q_of, {"a": a}) is None  # Q's last columns: any orthonormal basis is as right
    assert _judge(r, r_of, {"a": a}) is None
    a = _rows_alike(0)  # a Householder scalar of a column zero within rounding: 0 in fp32, 1.2 in float64
    assert _judge(torch.geqrf(a.float())[1], tau_of, {"a": a}) is None
    wrong = r.clone()
    wrong[0, 1:] *= 1.01  # R's first row is the matrix's one direction, defined to fp32's precision
    assert _judge(wrong, r_of, {"a": _rows_alike(1)}) is not None
