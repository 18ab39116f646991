"""Public names: each subpackage's ``__all__``, and what importing the package costs.

Mirrors hypothesis' ``_check_exports`` (``__all__`` equals the public names) and
``tests/numpy/test_import.py`` (importing does not pull in a heavy dependency).
"""

import importlib
import importlib.metadata
import json
import pkgutil
import subprocess
import sys
import types

import pytest

import triton_conformance

SUBPACKAGES = {
    # name: names in __all__ served lazily by the package's __getattr__ (they import torch)
    "triton_conformance": {"counterexample_inputs"},
    "triton_conformance.model": set(),
    "triton_conformance.strategies": {"build_inputs"},
    "triton_conformance.oracles": {"compare"},
}
ALL_MODULES = sorted(m.name for m in pkgutil.walk_packages(triton_conformance.__path__, "triton_conformance."))


def public_names(module):
    """Names a user sees in ``dir(module)``, less submodules and private names."""
    out = set()
    for name, value in vars(module).items():
        if name[0] in "_@":  # "@py_builtins": pytest rewrites asserts in plugin packages
            continue
        if isinstance(value, types.ModuleType) and value.__name__.startswith(module.__name__ + "."):
            continue  # a submodule is reachable as an attribute, not exported
        out.add(name)
    return out


def run_fresh(code):
    """Run ``code`` in a fresh interpreter; return what it prints as JSON."""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", sorted(SUBPACKAGES))
def test_all_equals_the_public_names(name):
    module = importlib.import_module(name)
    exported = {n for n in module.__all__ if not n.startswith("_")}
    lazy = SUBPACKAGES[name]
    public = public_names(module) | lazy
    assert exported == public, (sorted(exported - public), sorted(public - exported))
    assert len(module.__all__) == len(set(module.__all__)), "no duplicates"


@pytest.mark.parametrize("name", sorted(SUBPACKAGES))
def test_every_exported_name_resolves(name):
    module = importlib.import_module(name)
    for attr in module.__all__:
        assert hasattr(module, attr), attr


@pytest.mark.parametrize("name", ALL_MODULES)
def test_every_module_all_names_exist(name):
    module = importlib.import_module(name)
    for attr in getattr(module, "__all__", ()):
        assert hasattr(module, attr), f"{name}.__all__ names {attr!r}, which it does not define"


def test_the_top_level_package_exports_the_declaration_api_only():
    from triton_conformance import errors, model

    declaration = {"subject", "register", "get_subject", "Subject", "Contract", "Tensor", "Mask", "Dim", "Scalar",
                   "Tolerance", "Backward", "Performance", "Dropout", "StochasticRounding", "StochasticModel",
                   "Product", "Divisible"}
    # and counterexample_inputs, served lazily (tests/cover/test_counterexamples.py)
    assert set(triton_conformance.__all__) == declaration | set(errors.__all__) | {"__version__",
                                                                                  "counterexample_inputs"}
    for attr in declaration:
        assert getattr(triton_conformance, attr) is getattr(model, attr)
    for attr in errors.__all__:
        assert getattr(triton_conformance, attr) is getattr(errors, attr)
    for internal in ("registry", "Events", "model"):
        assert internal not in triton_conformance.__all__
    # the installed distribution's version (pyproject.toml), not just any string
    assert triton_conformance.__version__ == importlib.metadata.version("triton-conformance")


def test_unknown_lazy_attributes_raise_attribute_error():
    import triton_conformance.oracles as oracles
    import triton_conformance.strategies as strategies

    for module in (oracles, strategies):
        with pytest.raises(AttributeError):
            module.no_such_name  # noqa: B018


def test_lazy_build_inputs_is_the_function():
    import triton_conformance.strategies as strategies
    from triton_conformance.strategies import build_inputs
    from triton_conformance.strategies._internal.tensors import build_inputs as real

    assert build_inputs is real
    assert strategies.build_inputs is real and strategies.build_inputs is real  # twice: nothing shadows it


def test_lazy_compare_is_the_function():
    import triton_conformance.oracles as oracles
    from triton_conformance.oracles import compare
    from triton_conformance.oracles.comparison import compare as real

    assert compare is real
    assert oracles.compare is real


def test_importing_the_package_imports_neither_torch_nor_triton():
    out = run_fresh(
        "import json, sys\n"
        "import triton_conformance, triton_conformance.plugin, triton_conformance.strategies, "
        "triton_conformance.oracles, triton_conformance.model, triton_conformance.conformance.backend\n"
        "print(json.dumps(sorted(m for m in ('torch', 'triton', 'numpy') if m in sys.modules)))"
    )
    assert out == []


def test_the_plugin_imports_only_pytest_and_the_stdlib():
    out = run_fresh(
        "import json, sys, pytest\n"
        "before = set(sys.modules)\n"
        "import triton_conformance.plugin\n"
        "new = {m.split('.')[0] for m in set(sys.modules) - before}\n"
        "print(json.dumps(sorted(n for n in new if n not in sys.stdlib_module_names)))"
    )
    assert out == ["triton_conformance"]
