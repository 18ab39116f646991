"""Claims that differ by device: ``accumulate={"cpu": "input", "cuda": "float32"}``, a tolerance per device.

The judge bounds with its back end's claims: CUDA's on CUDA, the interpreter's where one is declared, else
the CPU's (the interpreter hands the launcher CPU tensors, so a library that dispatches on ``x.is_cuda``
runs its CPU path there).
"""

from __future__ import annotations

import pytest
import torch

from tests._subjects import as_subject
from triton_conformance import Backward, Contract, Dim, InvalidContract, Tensor, Tolerance
from triton_conformance.conformance.backend import Backend
from triton_conformance.conformance.judge import Judge
from triton_conformance.conformance.runner import run_cell
from triton_conformance.model.claims import PerDevice
from triton_conformance.model.subject import Subject

ROWS = {"x": Tensor(("M", "N"), dtypes=("float16",))}
DIMS = {"M": Dim(1, 4), "N": Dim(64, 512)}


def _sum_rounding_each_term(x):
    """A CPU path that accumulates in the input dtype (fp16), term by term, as some libraries' fallbacks do."""
    acc = torch.zeros(x.shape[0], dtype=x.dtype)
    for j in range(x.shape[1]):
        acc = acc + x[:, j]
    return acc


def _subject(accumulate) -> Subject:
    contract = Contract(inputs=ROWS, dims=DIMS, oracle=lambda x: x.sum(-1), reduces="N", accumulate=accumulate)
    return Subject(name="fp16_sum", family="fp16_sum", launcher=_sum_rounding_each_term, contract=contract,
                   module=__name__)


def test_the_cpu_claim_judges_the_interpreter_and_the_cuda_claim_cuda():
    per_device = _subject({"cpu": "input", "cuda": "float32"})
    assert run_cell(per_device, "layout:contiguous", backend=Backend()).outcome == "honoured"
    # The weaker claim of the two everywhere would hide nothing here; the stronger one finds the fp16 sum.
    strong = run_cell(_subject("float32"), "layout:contiguous", backend=Backend())
    assert (strong.outcome, strong.finding) == ("wrong", "mismatch"), strong.message
    # On CUDA the same outputs are held to float32 accumulation: the fp16 path would fail there.
    x = torch.linspace(-3, 3, 4 * 512).reshape(4, 512).to(torch.float16)
    out, dims, dtypes = _sum_rounding_each_term(x), {"M": 4, "N": 512}, {"x": "float16"}
    assert Judge(per_device, on_cuda=False).compare({"x": x}, dims, dtypes, {}, (out,)) is None
    found = Judge(per_device, on_cuda=True).compare({"x": x}, dims, dtypes, {}, (out,))
    assert found is not None and found.kind == "mismatch", found


def test_the_interpreter_takes_its_own_claim_before_the_cpus():
    contract = Contract(inputs=ROWS, dims=DIMS, oracle=lambda x: x.sum(-1),
                        accumulate={"cpu": "input", "cuda": "float32", "interpreter": "float64"},
                        tolerance={"cpu": Tolerance(rtol=0.5), "cuda": None})
    assert contract.on_device("interpreter").accumulate == "float64"
    assert contract.on_device("cpu").accumulate == "input"
    assert contract.on_device("cuda").accumulate == "float32"
    assert contract.on_device("interpreter").tolerance == Tolerance(rtol=0.5)  # none of its own: the CPU's
    assert contract.on_device("cuda").tolerance is None
    assert Judge(as_subject(contract)).claims.accumulate == "float64"
    assert Judge(as_subject(contract), on_cuda=True).claims.accumulate == "float32"


def test_under_pretend_cuda_the_interpreter_takes_the_cuda_claim():
    # The launcher sees CUDA-looking tensors there and takes its CUDA (Triton) path: CUDA's claim applies.
    subject = _subject({"cpu": "input", "cuda": "float32"})
    pretending = Subject(name="fp16_sum", family="fp16_sum", launcher=_sum_rounding_each_term,
                         contract=subject.contract, module=__name__, pretend_cuda=True)
    assert Judge(subject).claims.accumulate == "input"
    assert Judge(pretending).claims.accumulate == "float32"
    assert subject.contract.on_device("interpreter", interpreter_path="cuda").accumulate == "float32"


def test_a_gradient_accumulation_may_differ_by_device():
    contract = Contract(inputs={"x": Tensor(("N",), dtypes=("float16",))}, dims={"N": Dim(1, 8)},
                        oracle=lambda x: x * 2, backward=Backward(accumulate={"x": {"cpu": "input",
                                                                                     "cuda": "float32"}}))
    assert isinstance(contract.backward.accumulate["x"], PerDevice)
    assert contract.on_device("cpu").grad_accumulation("x", {"x": "float16"}) == "float16"
    assert contract.on_device("cuda").grad_accumulation("x", {"x": "float16"}) == "float32"


def test_an_unresolved_claim_is_not_read_as_one():
    contract = Contract(inputs=ROWS, dims=DIMS, oracle=lambda x: x, accumulate={"cpu": "input", "cuda": "float32"})
    with pytest.raises(ValueError, match=r"differs by device; resolve it with Contract.on_device"):
        contract.accumulation({"x": "float16"})


@pytest.mark.parametrize("field, value, match", [
    ("accumulate", {"cpu": "input"}, r"accumulate=\{'cpu': 'input'\}, expected a mapping from devices .* naming "
                                     r"'cpu' and 'cuda'"),
    ("accumulate", {"cpu": "input", "gpu": "float32"}, r"accumulate=.*'gpu'.*expected a mapping from devices"),
    ("accumulate", {"cpu": "half", "cuda": "float32"}, r"accumulate\['cpu'\]='half', expected a float dtype"),
    ("tolerance", {"cpu": 1e-3, "cuda": None}, r"tolerance\['cpu'\]=0.001, expected Tolerance\(...\), None, or"),
    ("tolerance", {"cuda": Tolerance(rtol=1e-3)}, r"tolerance=.*naming 'cpu' and 'cuda'"),
])
def test_a_bad_per_device_claim_is_named(field, value, match):
    with pytest.raises(InvalidContract, match=match):
        Contract(inputs=ROWS, dims=DIMS, oracle=lambda x: x, **{field: value})


# -- dtypes per device ---------------------------------------------------------------------------------------
NO_CPU_BF16 = {"cpu": ("float16", "float32"), "cuda": ("float16", "bfloat16", "float32")}


def test_a_tensors_dtypes_may_differ_by_device_and_each_device_reads_its_own():
    contract = Contract(inputs={"x": Tensor(("N",), dtypes=NO_CPU_BF16), "y": Tensor(("N",), same_dtype_as="x")},
                        dims={"N": Dim(1, 8)}, oracle=lambda x, y: x + y)
    assert isinstance(contract.inputs["x"].device_dtypes, PerDevice)
    assert contract.inputs["x"].dtypes == ("float16", "float32", "bfloat16")  # every device's, for the cells
    for device, path, expected, source in [("cpu", "cpu", NO_CPU_BF16["cpu"], "cpu"),
                                           ("cuda", "cpu", NO_CPU_BF16["cuda"], "cuda"),
                                           ("interpreter", "cpu", NO_CPU_BF16["cpu"], "cpu"),
                                           ("interpreter", "cuda", NO_CPU_BF16["cuda"], "cuda")]:
        resolved = contract.on_device(device, interpreter_path=path)
        assert resolved.inputs["x"].dtypes == expected and resolved.inputs["x"].device_dtypes is None
        assert resolved.inputs["y"].dtypes == expected  # a follower follows the resolved dtypes
        assert contract.claims_source(device, path) == source
    assert Contract(inputs=ROWS, dims=DIMS, oracle=lambda x: x).claims_source("cuda") is None


@pytest.mark.parametrize("dtypes, same, match", [
    ({"cpu": ("float16",)}, None, r"Tensor: dtypes=\{'cpu': \('float16',\)\}, expected a mapping from devices .* "
                                  r"naming 'cpu' and 'cuda'"),
    ({"cpu": ("float16",), "cuda": ("half",)}, None, r"Tensor: dtypes='half', expected one of"),
    ({"cpu": ("float16",), "cuda": ("float16",)}, "x", r"Tensor: dtypes=.*expected none per device with "
                                                       r"same_dtype_as='x'"),
])
def test_a_bad_per_device_dtype_claim_is_named(dtypes, same, match):
    with pytest.raises(InvalidContract, match=match):
        Tensor(("N",), dtypes=dtypes, same_dtype_as=same)


def test_the_report_says_whose_claims_applied():
    from triton_conformance.conformance.kinds import catalogue
    from triton_conformance.model.outcomes import CellResult
    from triton_conformance.reports.html_detail import detail_section

    result = CellResult(subject="s", family="f", cell="dtype:bfloat16", outcome="honoured", message="ok",
                        details={"claims_of": "cuda"})
    assert "the contract's &#x27;cuda&#x27; claims" in detail_section("0", result.to_dict(), None, catalogue())
