"""The one device parser (model/config.parse_device) and the Backend built on it."""

import pytest
import torch

from triton_conformance.conformance.backend import Backend
from triton_conformance.errors import ConformanceUsageError
from triton_conformance.model.config import on_cuda, parse_device


@pytest.mark.parametrize("name, expected", [
    ("interpreter", "interpreter"), ("cpu", "interpreter"), (torch.device("cpu"), "interpreter"),
    ("cuda", "cuda"), ("cuda:1", "cuda"), (torch.device("cuda", 0), "cuda"), ("auto", "auto"),
], ids=["interpreter", "cpu", "torch-cpu", "cuda", "cuda-index", "torch-cuda", "auto"])
def test_every_spelling_of_a_device_parses_to_where_kernels_run(name, expected):
    assert parse_device(name) == expected
    assert on_cuda(name) is (expected == "cuda")


@pytest.mark.parametrize("name", ["gpu", "CUDA", "cudas", "auto:0", "", None, "mps"])
def test_an_unknown_device_name_is_a_usage_error_naming_where_it_came_from(name):
    with pytest.raises(ConformanceUsageError, match=rf"--conformance-device={name!r}, expected one of "
                                                    r"\('interpreter', 'cuda', 'auto'\)"):
        parse_device(name, where="--conformance-device")


@pytest.mark.parametrize("name, compiles, device", [("cpu", False, "cpu"), ("interpreter", False, "cpu"),
                                                     ("cuda:0", True, "cuda")])
def test_backend_named_reads_a_reproducers_device(name, compiles, device):
    backend = Backend.named(name)
    assert (backend.compiles, backend.device, backend.on_device) == (compiles, device, compiles)


def test_backend_refuses_an_unresolved_or_unknown_name():
    for name in ("auto", "cpu", "gpu"):
        with pytest.raises(ConformanceUsageError, match=rf"Backend: name={name!r}"):
            Backend(name=name)
    with pytest.raises(ConformanceUsageError, match="Backend: name='auto'"):  # resolved first: select_device
        Backend.named("auto")
