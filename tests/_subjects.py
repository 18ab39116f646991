"""A bare contract as an (unregistered) subject, for tests that ask the cell kinds about a contract."""

from triton_conformance.model.subject import Subject


def as_subject(contract, name="bare"):
    return Subject(name=name, family=name, launcher=lambda **kw: None, contract=contract, module=__name__)
