"""The official kubernetes client imported by what is used, not whole.

`import kubernetes` (or any `kubernetes.client...` import: a package's
`__init__` runs before its submodules) executes `kubernetes/__init__.py`,
`kubernetes/client/__init__.py` and their `api` and `models` packages, which
import every API class and every model: ~1300 modules, 58 MiB of the
dispatcher's 125 MiB of imports (benchmarks/README.md, "Dispatcher start").
The dispatcher uses two API classes, `ApiClient`, `Configuration`,
`ApiException` and a few dozen models.

`install()` gives those packages (`kubernetes`, `kubernetes.client` and its
`api` and `models`; `kubernetes.config`, whose kubeconfig loader imports
google-auth, oauthlib and requests, and `kubernetes.utils`, whose YAML
loader imports the dynamic client, where only `parse_quantity` and the
in-cluster config are used) module objects made from their own specs whose
`__init__` is not run: a module `__getattr__` (PEP 562)
imports the submodule a name comes from on first use. The names and their
submodules are read from the package's own `__init__.py` (its top-level
imports, such as `from kubernetes.client.models.v1_job import V1Job`), so every name the
real package exports resolves to the same object it would. A name not among
them and not a submodule (`__version__`, anything a later client adds in
another form) runs the
real `__init__` into the module, once, so it behaves as the whole package
would. `getattr(kubernetes.client.models, "V1Job")`, which `ApiClient`'s
deserializer does, goes through the same lookup.

Checked against kubernetes 36.0.3 (the lock); tests/backends/test_k8s_lean_import.py
holds the exports to the whole package's.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
import threading

# Packages whose `__init__` only imports (kubernetes.config also defines `load_config`, which
# falls back to the whole `__init__`), parents first: a submodule's import needs its parent.
LEAN_PACKAGES = (
    "kubernetes",
    "kubernetes.client",
    "kubernetes.client.api",
    "kubernetes.client.models",
    "kubernetes.config",
    "kubernetes.utils",
)
_lock = threading.RLock()


def exports(package: str, source: str) -> dict[str, tuple[str, str | None]]:
    """What a package's `__init__` imports at its top: name -> (module, attribute), None for a submodule itself."""
    found: dict[str, tuple[str, str | None]] = {}
    for node in ast.parse(source).body:
        if not isinstance(node, ast.ImportFrom) or node.module == "__future__":
            continue
        base = package if node.level == 1 else "" if node.level == 0 else None
        if base is None:  # from .. import: none of these packages does it
            continue
        module = ".".join(part for part in (base, node.module) if part)
        for alias in node.names:
            name = alias.asname or alias.name
            found[name] = (f"{module}.{alias.name}", None) if node.module is None else (module, alias.name)
    return found


def install() -> bool:
    """Make LEAN_PACKAGES lean, unless kubernetes is already imported (then it stays whole). True if installed."""
    with _lock:
        if "kubernetes" in sys.modules:
            return getattr(sys.modules["kubernetes"], "__lean__", False)
        for package in LEAN_PACKAGES:
            spec = importlib.util.find_spec(package)
            if spec is None or spec.loader is None:  # not installed (its first import says so), or moved
                if package == "kubernetes":
                    return False
                continue
            module = importlib.util.module_from_spec(spec)
            _make_lean(module, spec, exports(package, spec.loader.get_source(package) or ""))
            sys.modules[package] = module
            parent, _, child = package.rpartition(".")
            if parent:
                setattr(sys.modules[parent], child, module)
        return True


def _make_lean(module, spec, names: dict[str, tuple[str, str | None]]) -> None:
    whole = []  # the real __init__ has run
    # Exports named as the submodule they come from (kubernetes.utils.create_from_yaml, the function):
    # importing that submodule binds the module to the package's attribute, as in the real `__init__`,
    # which then binds the function over it. Here the function is bound back after each import.
    shadowed = {n: t for n, t in names.items() if t[1] is not None and t[0] == f"{module.__name__}.{n}"}

    def __getattr__(name: str):
        target = names.get(name)
        if target is not None:
            source, attribute = target
            value = importlib.import_module(source)
            if attribute is not None:
                value = getattr(value, attribute)
            setattr(module, name, value)
            for n, (source, attribute) in shadowed.items():
                if source in sys.modules and module.__dict__.get(n) is sys.modules[source]:
                    setattr(module, n, getattr(sys.modules[source], attribute))
            return value
        submodule = f"{module.__name__}.{name}"
        if not name.startswith("_") and importlib.util.find_spec(submodule) is not None:
            return importlib.import_module(submodule)  # `from kubernetes.client import rest`
        if name.startswith("__") and name not in ("__version__", "__all__"):
            raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}")
        with _lock:
            if not whole:
                whole.append(True)
                spec.loader.exec_module(module)
        try:
            return module.__dict__[name]
        except KeyError:
            raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}") from None

    module.__getattr__ = __getattr__
    module.__dir__ = lambda: sorted(set(module.__dict__) | set(names))
    module.__lean__ = True
