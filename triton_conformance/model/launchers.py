"""The forms a subject's launcher may take, each wrapped in the keyword callable every cell calls.

- a function (the host launcher itself), called with the declared inputs and scalars by keyword;
- a ``torch.autograd.Function`` subclass: ``apply`` gets them by position, each at its
  name's place among ``forward``'s parameters after ``ctx`` (undeclared ones keep their defaults);
- an ``nn.Module`` instance, called with them by keyword; or, with ``parameters=``, a
  module (the instance, its class or a factory built per launch from the dims and scalars
  its signature names) whose parameters are replaced by the drawn inputs named there.

Nothing here imports torch: a torch class exists only if torch already is.
"""

from __future__ import annotations

import inspect
import sys
from typing import Any, Callable, Iterable, Mapping

from triton_conformance.errors import InvalidContract
from triton_conformance.model.contract import Dim, Mask, Scalar, Tensor, check_accepts

__all__ = ["FORMS", "launcher_form", "function_launcher", "module_launcher", "is_module_instance"]

FORMS = ("function", "autograd.Function", "nn.Module")


def _torch_class(obj: Any, path: str) -> bool:
    """Whether ``obj`` is a subclass of torch's ``path`` (torch is not imported here: a torch
    class exists only if torch already is)."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(obj, type):
        return False
    base: Any = torch
    for part in path.split("."):
        base = getattr(base, part, None)
    return isinstance(base, type) and issubclass(obj, base)


def is_module_instance(obj: Any) -> bool:
    return _torch_class(type(obj), "nn.Module")


def _keyword_signature(names: Iterable[str]) -> inspect.Signature:
    return inspect.Signature([inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY) for n in names])


def _named(adapter: Callable[..., Any], target: Any, names: list[str], form: str) -> Callable[..., Any]:
    owner = target if isinstance(target, type) or callable(target) and not is_module_instance(target) else type(target)
    adapter.__name__ = getattr(owner, "__name__", type(target).__name__)
    adapter.__qualname__ = getattr(owner, "__qualname__", adapter.__name__)
    adapter.__module__ = getattr(owner, "__module__", None) or adapter.__module__
    adapter.__doc__ = getattr(owner, "__doc__", None)
    adapter.__signature__ = _keyword_signature(names)  # type: ignore[attr-defined]
    adapter.__wrapped_target__ = target  # type: ignore[attr-defined]
    adapter.__launcher_form__ = form  # type: ignore[attr-defined]
    return adapter


def _signed(fn: Any, params: list[inspect.Parameter]) -> Callable[..., Any]:
    """A stand-in for ``fn`` with just ``params`` (for check_accepts)."""
    def stand_in(*args: Any, **kwargs: Any) -> None:
        return None

    stand_in.__qualname__ = getattr(fn, "__qualname__", "forward")
    stand_in.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    return stand_in


def _parameters_after_ctx(fn_class: type) -> list[inspect.Parameter]:
    """``forward``'s parameters as ``apply`` takes them: after ``ctx``, unless the class
    has a separate ``setup_context`` (then ``forward`` takes no ctx)."""
    params = list(inspect.signature(fn_class.forward).parameters.values())
    torch = sys.modules["torch"]
    separate = getattr(fn_class, "setup_context", None) is not getattr(torch.autograd.Function, "setup_context", None)
    return params if separate else params[1:]


def function_launcher(fn_class: type, names: list[str]) -> Callable[..., Any]:
    """``fn_class.apply`` with the declared inputs and scalars passed positionally, each at
    its name's place in ``forward``'s signature; undeclared parameters keep their defaults."""
    owner = f"register: launcher={fn_class.__qualname__}.forward"
    params = _parameters_after_ctx(fn_class)
    for p in params:
        if p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD, inspect.Parameter.KEYWORD_ONLY):
            raise InvalidContract(f"{owner} has parameter {p}, expected named positional parameters after ctx "
                                  "(Function.apply passes arguments by position)")
    check_accepts(owner, _signed(fn_class.forward, params), names)
    declared = set(names)
    last = max((i for i, p in enumerate(params) if p.name in declared), default=-1)
    order = params[: last + 1]

    def launcher(**kw: Any) -> Any:
        return fn_class.apply(*[kw[p.name] if p.name in kw else p.default for p in order])

    return _named(launcher, fn_class, names, "autograd.Function")


def _resolve(module: Any, path: str) -> tuple[Any, str]:
    *owners, leaf = path.split(".")
    for part in owners:
        module = getattr(module, part)
    return module, leaf


def _assign(module: Any, parameters: Mapping[str, str], kw: Mapping[str, Any], where: str) -> None:
    """Put each drawn tensor in place of the module's parameter (or buffer) ``parameters[name]``."""
    torch = sys.modules["torch"]
    for name, path in parameters.items():
        try:
            owner, leaf = _resolve(module, path)
        except AttributeError:
            owner, leaf = None, path
        if owner is not None and leaf in getattr(owner, "_parameters", {}):
            # The drawn view itself (its strides, offset and storage), not a copy.  When a gradient
            # cell asks for its gradient, the tensor itself, so the gradient reaches the caller's leaf.
            owner._parameters[leaf] = (kw[name] if kw[name].requires_grad
                                       else torch.nn.Parameter(kw[name], requires_grad=False))
        elif owner is not None and leaf in getattr(owner, "_buffers", {}):
            owner._buffers[leaf] = kw[name]
        else:
            raise InvalidContract(f"{where}: parameters[{name!r}]={path!r}, expected the name of a parameter or "
                                  f"buffer of the {type(module).__name__} (it has "
                                  f"{sorted(n for n, _ in module.named_parameters())})")


def module_launcher(target: Any, names: list[str], inputs: Mapping[str, Tensor | Mask],
                     dims: Mapping[str, Dim], scalars: Mapping[str, Scalar],
                     parameters: Mapping[str, str] | None) -> Callable[..., Any]:
    """An nn.Module instance, called with the declared inputs and scalars by keyword; or, with
    ``parameters=``, a module built per launch (an instance, its class or a factory) whose
    parameters are the drawn inputs ``parameters`` names."""
    parameters = dict(parameters or {})
    where = f"register: launcher={getattr(target, '__qualname__', type(target).__qualname__)}"
    for name, path in parameters.items():
        if name not in inputs or inputs[name].is_mask:
            raise InvalidContract(f"{where}: parameters[{name!r}], expected a declared Tensor input "
                                  f"(declared: {sorted(inputs)})")
        if not (isinstance(path, str) and all(p.isidentifier() for p in path.split("."))):
            raise InvalidContract(f"{where}: parameters[{name!r}]={path!r}, expected a parameter's attribute path "
                                  "such as 'weight' or 'norm.weight'")
    instance = target if is_module_instance(target) else None
    built_args: list[str] = []
    if instance is None:  # a factory (or an nn.Module class): its parameters are dims and scalars, by name
        sig = inspect.signature(target)
        known = list(dims) + list(scalars)
        for p in sig.parameters.values():
            if p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
                continue
            if p.name in known:
                built_args.append(p.name)
            elif p.default is inspect.Parameter.empty:
                raise InvalidContract(f"{where}: the module factory's parameter {p.name!r} is neither a declared "
                                      f"dim nor a scalar; expected parameters named after dims={sorted(dims)} or "
                                      f"scalars={sorted(scalars)}, or with a default")
        forward = target.forward if isinstance(target, type) else None
    else:
        for name, path in parameters.items():  # an instance can be checked now
            _assign_check(instance, name, path, where)
        forward = instance.forward
    forward_names = [n for n in names if n not in parameters and not (n in scalars and n in built_args)]
    if forward is not None:
        params = list(inspect.signature(forward).parameters.values())
        if instance is None:
            params = params[1:]  # the unbound forward's self
        check_accepts(f"{where}.forward", _signed(forward, params), forward_names)

    def launcher(**kw: Any) -> Any:
        module = instance
        if module is None:
            sizes = {}
            for name, decl in inputs.items():
                shape = getattr(kw.get(name), "shape", None)
                if shape is not None:
                    sizes.update({sym: int(n) for sym, n in zip(decl.shape, shape)})
            module = target(**{a: (sizes[a] if a in dims else kw[a]) for a in built_args})
            if not is_module_instance(module):
                raise TypeError(f"{where}: the factory returned {type(module).__name__}, expected an nn.Module")
            device = next((t.device for t in kw.values() if hasattr(t, "device")), None)
            if device is not None:
                module = module.to(device)
        _assign(module, parameters, kw, where)
        return module(**{n: kw[n] for n in forward_names})

    return _named(launcher, target, names, "nn.Module")


def _assign_check(module: Any, name: str, path: str, where: str) -> None:
    try:
        owner, leaf = _resolve(module, path)
    except AttributeError:
        owner, leaf = None, path
    if owner is None or not (leaf in getattr(owner, "_parameters", {}) or leaf in getattr(owner, "_buffers", {})):
        raise InvalidContract(f"{where}: parameters[{name!r}]={path!r}, expected the name of a parameter or buffer "
                              f"of the {type(module).__name__} (it has "
                              f"{sorted(n for n, _ in module.named_parameters())})")


def launcher_form(launcher: Any, parameters: Mapping[str, str] | None) -> str:
    """How ``launcher`` is called: "function", "autograd.Function" or "nn.Module"."""
    if _torch_class(launcher, "autograd.Function"):
        return "autograd.Function"
    if parameters is not None or is_module_instance(launcher) or _torch_class(launcher, "nn.Module"):
        return "nn.Module"
    return "function"
