"""The contract model (conformance/contract.py) and subjects (conformance/subject.py)."""

import dataclasses
import inspect

import pytest

import triton_conformance as tc
from triton_conformance import Contract, Dim, InvalidContract, Mask, Scalar, Tensor, Tolerance
from triton_conformance.model.contract import FLOAT_DTYPES
from triton_conformance.model.subject import Subject, registry


def oracle_x(x):
    return x


def oracle_xy(x, y):
    return x


def contract(**kw):
    base = dict(inputs={"x": Tensor(("M", "N"))}, dims={"M": Dim(1, 8), "N": Dim(1, 8)}, oracle=oracle_x)
    base.update(kw)
    return Contract(**base)


# -- Dim -----------------------------------------------------------------

@pytest.mark.parametrize("lo, hi, n, expected", [
    (1, 8, 1, True), (1, 8, 8, True), (1, 8, 0, False), (1, 8, 9, False), (0, 0, 0, True), (3, 3, 2, False),
], ids=lambda v: repr(v))
def test_dim_admits_is_inclusive(lo, hi, n, expected):
    assert Dim(lo, hi).admits(n) is expected


def test_dim_defaults():
    d = Dim()
    assert (d.min, d.max) == (1, 4096)


# (constructor, substring the message must contain)
INVALID = [
    pytest.param(lambda: Dim(5, 2), "cannot have max=2 < min=5", id="dim-max-below-min"),
    pytest.param(lambda: Dim(-1, 2), "min=-1", id="dim-negative"),
    pytest.param(lambda: Dim(1.0, 2), "min=1.0", id="dim-float"),
    pytest.param(lambda: Dim(True, 2), "min=True", id="dim-bool"),
    pytest.param(lambda: Tensor(("M",), dtypes=()), "dtypes=()", id="tensor-no-dtypes"),
    pytest.param(lambda: Tensor(("M",), dtypes=("float8",)), "dtypes='float8'", id="tensor-unknown-dtype"),
    pytest.param(lambda: Tensor(("M",), layouts="strided"), "layouts='strided'", id="tensor-unknown-layout"),
    pytest.param(lambda: Tensor(("M", 3)), "shape=", id="tensor-non-symbol-shape"),
    pytest.param(lambda: Tensor(("M", "2N")), "shape=", id="tensor-non-identifier-shape"),
    pytest.param(lambda: Mask(("N",), kind="float"), "kind='float'", id="mask-unknown-kind"),
    pytest.param(lambda: Mask(("N",), fully_masked="inf"), "fully_masked='inf'", id="mask-unknown-policy"),
    pytest.param(lambda: Mask(()), "shape=()", id="mask-no-dims"),
    pytest.param(lambda: Mask(("N",), layouts="strided"), "layouts='strided'", id="mask-unknown-layout"),
    pytest.param(lambda: Scalar(2.0, 1.0), "cannot have high=1.0 < low=2.0", id="scalar-high-below-low"),
    pytest.param(lambda: Scalar(0.0, float("inf")), "high=inf", id="scalar-infinite"),
    pytest.param(lambda: Scalar(0, 1, kind="complex"), "kind='complex'", id="scalar-unknown-kind"),
    pytest.param(lambda: Scalar(False, 1), "low=False", id="scalar-bool"),
    pytest.param(lambda: Tolerance(rtol=-1e-3), "rtol=-0.001", id="tolerance-negative"),
    pytest.param(lambda: Tolerance(atol="1e-3"), "atol='1e-3'", id="tolerance-string"),
    pytest.param(lambda: contract(inputs={}), "inputs={}", id="contract-no-inputs"),
    pytest.param(lambda: contract(inputs={"x": "M,N"}), "inputs['x']='M,N'", id="contract-input-not-tensor"),
    pytest.param(lambda: contract(inputs={"2x": Tensor(("M", "N"))}), "inputs='2x'", id="contract-bad-input-name"),
    pytest.param(lambda: contract(dims={"M": Dim(1, 8)}), "inputs['x'].shape='N'", id="contract-undeclared-dim"),
    pytest.param(lambda: contract(dims={"M": Dim(), "N": Dim(), "K": Dim()}), "dims=['K']", id="contract-unused-dim"),
    pytest.param(lambda: contract(dims={"M": Dim(), "N": (1, 8)}), "dims['N']=(1, 8)", id="contract-dim-not-Dim"),
    pytest.param(lambda: contract(scalars={"eps": (0, 1)}), "scalars['eps']=(0, 1)", id="contract-scalar-not-Scalar"),
    pytest.param(lambda: contract(scalars={"x": Scalar(0, 1)}, oracle=lambda x: x), "scalars='x'",
                 id="contract-scalar-shadows-input"),
    pytest.param(lambda: contract(reduces="K"), "reduces='K'", id="contract-reduces-unknown"),
    pytest.param(lambda: contract(tolerance=1e-3), "tolerance=0.001", id="contract-tolerance-not-Tolerance"),
    pytest.param(lambda: contract(values=("nan", "subnormal")), "values='subnormal'", id="contract-unknown-value"),
    pytest.param(lambda: contract(accumulate="int32"), "accumulate='int32'", id="contract-int-accumulate"),
    pytest.param(lambda: contract(max_elements=0), "max_elements=0", id="contract-zero-budget"),
    pytest.param(lambda: contract(inputs={"x": Tensor(("M", "N")), "m1": Mask(("N",)), "m2": Mask(("N",))},
                                  oracle=lambda x, m1, m2: x), "at most one Mask", id="contract-two-masks"),
    pytest.param(lambda: contract(oracle=42), "oracle=42", id="contract-oracle-not-callable"),
    pytest.param(lambda: contract(oracle=oracle_xy), "does not accept the declared inputs", id="contract-oracle-arity"),
]


@pytest.mark.parametrize("make, message", INVALID)
def test_invalid_declarations_raise_invalid_contract_quoting_the_value(make, message):
    with pytest.raises(InvalidContract) as info:
        make()
    assert message in str(info.value)
    # and says what was wanted
    assert any(w in str(info.value) for w in ("expected", "cannot have", "does not accept"))


def test_invalid_contract_is_a_type_error():
    with pytest.raises(TypeError):
        Dim(3, 1)


@pytest.mark.parametrize("spelling", [
    ("M", "N"), ["M", "N"], "M, N", "(M, N)", "M,N",
], ids=["tuple", "list", "comma-string", "paren-string", "tight-string"])
def test_shape_spellings_normalise_to_a_tuple(spelling):
    assert Tensor(spelling).shape == ("M", "N")


@pytest.mark.parametrize("spelling", ["float16", ("float16",), ["torch.float16"]],
                         ids=["str", "tuple", "torch-prefix"])
def test_dtype_spellings_normalise(spelling):
    assert Tensor(("M",), dtypes=spelling).dtypes == ("float16",)


def test_torch_dtype_objects_are_accepted():
    torch = pytest.importorskip("torch")
    assert Tensor(("M",), dtypes=(torch.bfloat16, torch.float32)).dtypes == ("bfloat16", "float32")


@pytest.mark.parametrize("kind, default", [("bool", ("bool",)), ("additive", ("float32",))])
def test_mask_default_dtype_follows_kind(kind, default):
    m = Mask(("M", "N"), kind=kind)
    assert m.dtypes == default
    assert m.is_mask and not Tensor(("M",)).is_mask


@pytest.mark.parametrize("obj", [
    Dim(1, 2), Tensor(("M",)), Mask(("M",)), Scalar(0, 1), Tolerance(rtol=1e-3), contract(),
], ids=lambda o: type(o).__name__)
def test_value_objects_are_frozen_and_slotted(obj):
    field = dataclasses.fields(obj)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(obj, field, getattr(obj, field))
    assert not hasattr(obj, "__dict__")


def test_value_objects_compare_by_value():
    assert Dim(1, 8) == Dim(1, 8) != Dim(1, 9)
    assert Tensor("M, N", dtypes="float16") == Tensor(("M", "N"), dtypes=("float16",))


def test_contract_values_accepts_a_single_string():
    assert contract(values="nan").values == ("nan",)


def test_contract_derived_views():
    c = Contract(
        inputs={"q": Tensor(("M", "D"), dtypes=("float16", "float32")),
                "idx": Tensor(("M",), dtypes=("int64",)),
                "mask": Mask(("M", "N")),
                "k": Tensor(("N", "D"), dtypes=("bfloat16", "float16"))},
        dims={"M": Dim(), "N": Dim(), "D": Dim()},
        oracle=lambda q, idx, mask, k: q,
    )
    assert c.mask_name == "mask"
    assert c.tensor_names == ["q", "idx", "k"]
    # declaration order, no duplicates, no ints, nothing from the mask
    assert c.float_dtypes() == ("float16", "float32", "bfloat16")
    assert contract().mask_name is None


def test_float_dtypes_is_empty_for_integer_subjects():
    c = contract(inputs={"x": Tensor(("M", "N"), dtypes=("int32",))})
    assert c.float_dtypes() == ()


def test_oracle_with_kwargs_or_builtin_is_accepted():
    assert contract(oracle=lambda **kw: None).oracle is not None
    assert contract(oracle=max).oracle is max  # no signature to check


def test_every_float_dtype_is_accepted():
    assert Tensor(("M",), dtypes=FLOAT_DTYPES).dtypes == FLOAT_DTYPES


# -- subjects ------------------------------------------------------------

_DECL = dict(inputs={"x": Tensor(("N",))}, dims={"N": Dim(1, 8)}, oracle=oracle_x)


def launcher_a(x):
    return x


def launcher_b(x):
    return x


def test_register_returns_a_subject_that_calls_the_launcher():
    s = tc.register(launcher_a, name="cover_contract_register", family="fam", **_DECL)
    assert isinstance(s, Subject)
    assert s(x=41) == 41
    assert s.family == "fam"
    assert s.module == __name__  # the declaring module, not the package's own
    assert tc.get_subject("cover_contract_register") is s
    assert repr(s) == f"<Subject 'cover_contract_register' (fam) from {__name__}>"


def test_register_defaults_name_and_family_to_the_launcher():
    s = tc.register(launcher_b, **dict(_DECL, oracle=lambda x: x))
    assert (s.name, s.family) == ("launcher_b", "launcher_b")


def test_reregistering_the_same_launcher_is_idempotent():
    first = tc.register(launcher_a, name="cover_contract_twice", **_DECL)
    second = tc.register(launcher_a, name="cover_contract_twice", **_DECL)
    assert tc.get_subject("cover_contract_twice") is second
    assert first.launcher is second.launcher


def test_a_name_taken_by_another_launcher_is_refused():
    tc.register(launcher_a, name="cover_contract_clash", **_DECL)
    with pytest.raises(InvalidContract, match=r"name='cover_contract_clash' is already declared"):
        tc.register(launcher_b, name="cover_contract_clash", **_DECL)
    assert tc.get_subject("cover_contract_clash").launcher is launcher_a


def test_subject_decorator_records_the_module():
    @tc.subject(name="cover_contract_decorated", **_DECL)
    def f(x):
        return x + 1

    assert isinstance(f, Subject)
    assert f(x=1) == 2
    assert f.module == __name__


@pytest.mark.parametrize("name", ["a b", "a[b]", "a:b", "a/b"], ids=["space", "brackets", "colon", "slash"])
def test_register_refuses_names_that_break_node_ids(name):
    with pytest.raises(InvalidContract, match="name="):
        tc.register(launcher_a, name=name, **_DECL)


def test_register_checks_the_launcher_signature():
    def takes_y(y):
        return y

    with pytest.raises(InvalidContract, match="launcher.*does not accept"):
        tc.register(takes_y, name="cover_contract_sig", **_DECL)


def test_register_checks_scalars_reach_the_launcher():
    with pytest.raises(InvalidContract, match="does not accept"):
        tc.register(launcher_a, name="cover_contract_scalar", scalars={"eps": Scalar(0, 1)},
                    **dict(_DECL, oracle=lambda x, eps: x))


def test_register_requires_an_oracle_or_model():
    with pytest.raises(InvalidContract, match="oracle=None"):
        tc.register(launcher_a, name="cover_contract_no_oracle", inputs=_DECL["inputs"], dims=_DECL["dims"])


def test_register_refuses_non_callables():
    with pytest.raises(InvalidContract, match="launcher=3"):
        tc.register(3, name="cover_contract_three", **_DECL)


def test_register_and_subject_read_a_string_of_values_as_one_class():
    declared = tc.register(launcher_a, name="cover_contract_values_huge", values="huge", **_DECL)
    assert declared.contract.values == ("huge",)

    @tc.subject(name="cover_contract_values_nan", values="nan", **_DECL)
    def decorated(x):
        return x

    assert decorated.contract.values == ("nan",)


def test_register_names_a_misspelled_field_as_subject_does():
    with pytest.raises(InvalidContract, match=r"register: tolerence= is not a field of a declaration "
                       r"\(subject 'cover_contract_typo' .*did you mean tolerance=\?"):
        tc.register(launcher_a, name="cover_contract_typo", tolerence=None, **_DECL)


def test_every_contract_field_is_a_keyword_of_register_and_documented():
    from triton_conformance.model.subject import FIELDS

    parameters = inspect.signature(tc.register).parameters
    for f in dataclasses.fields(Contract):
        assert f.name in FIELDS and f.name in parameters, f.name
    for name in FIELDS:
        assert f"- ``{name}``:" in tc.register.__doc__, f"register's docstring does not explain {name}="
    declared = tc.register(launcher_a, name="cover_contract_every_field", strict=True, inplace="x",
                           autotuned=launcher_b, **_DECL)
    assert (declared.contract.strict, declared.contract.inplace, declared.contract.autotuned) == (
        True, ("x",), (launcher_b,))


@pytest.mark.parametrize("autotuned, expected", [(None, ()), ((), ()), (launcher_b, (launcher_b,)),
                                                 ([launcher_a, launcher_b], (launcher_a, launcher_b))],
                         ids=["none", "empty", "one", "list"])
def test_contract_autotuned_holds_the_declared_objects_as_a_tuple(autotuned, expected):
    assert contract(autotuned=autotuned).autotuned == expected


def test_contract_autotuned_refuses_a_name_in_place_of_the_kernel():
    with pytest.raises(InvalidContract, match=r"autotuned='softmax_kernel', expected @triton.autotune kernels"):
        contract(autotuned="softmax_kernel")


def test_get_subject_names_what_is_declared():
    with pytest.raises(KeyError, match="no subject named 'cover_contract_nobody'"):
        tc.get_subject("cover_contract_nobody")


def test_registry_iterates_sorted_by_family_then_name():
    tc.register(launcher_a, name="cover_contract_zz", family="cover_contract_fam_a", **_DECL)
    tc.register(launcher_a, name="cover_contract_aa", family="cover_contract_fam_b", **_DECL)
    ours = [s.name for s in registry if s.name in ("cover_contract_zz", "cover_contract_aa")]
    assert ours == ["cover_contract_zz", "cover_contract_aa"]
    keys = [(s.family, s.name) for s in registry]
    assert keys == sorted(keys)
    assert len(registry) == len(keys)


def test_load_modules_reports_unimportable_modules():
    from triton_conformance.model.subject import load_modules

    with pytest.raises(InvalidContract, match="cannot import 'cover_no_such_module_xyz'"):
        load_modules(["cover_no_such_module_xyz"])
