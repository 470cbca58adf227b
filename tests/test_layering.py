"""The layering rule of DESIGN.md, checked on the source: a lower layer never imports a higher one.

Every `import` and `from ... import` statement of every module under `symjit/` is read from its
AST, at any depth (an import inside a function is still a dependency, only a later one), and
resolved to the module it names. Layers, lowest first:

    0  symjit._version, symjit.base, symjit.context,  (shared leaves: version, errors, devices,
       symjit.util                                     MXNet's np-shape/np-array switches)
    1  symjit.ops                                     (the op registry and its global RNG state)
    2  symjit.ir
    3  symjit.passes
    4  symjit.runtime, symjit._runtime                (the binding of the native runtime)
    5  symjit.codegen
    9  the package root `symjit` (its __init__: the MXNet API's names)
   10  everything else: the frontends (ndarray, symbol, gluon, module, kvstore, autograd, cli, ...)

A module may import modules of its own layer or lower ones. So the core (layers 0-5) never
imports a frontend or the package root, passes never import codegen or ask the host runtime
(what the target offers reaches them as data), and codegen reads `__version__` from
`symjit._version`, not from the package root.
"""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "symjit"

LAYERS = {
    "symjit._version": 0, "symjit.base": 0, "symjit.context": 0, "symjit.util": 0,
    "symjit.ops": 1,
    "symjit.ir": 2,
    "symjit.passes": 3,
    "symjit.runtime": 4, "symjit._runtime": 4,
    "symjit.codegen": 5,
    "symjit": 9,
}
FRONTEND = 10
CORE_MAX = 5

#: (importing module, imported module) -> why this upward import is allowed (each one must still
#: exist, see test_allowed_exceptions_are_still_needed). Empty: none is.
ALLOWED: dict[tuple[str, str], str] = {}


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def layer(module: str) -> int:
    """The layer of `module`: that of its longest listed prefix; unlisted modules are frontends."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        prefix = ".".join(parts[:n])
        if prefix in LAYERS:
            return LAYERS[prefix] if n > 1 or len(parts) == 1 else FRONTEND
    return FRONTEND


def resolve(target: str, known: dict) -> str:
    """The module `target` names: itself, or (a name defined in a package) its package."""
    while target not in known and "." in target:
        target = target.rsplit(".", 1)[0]
    return target


def imports_of(name: str, path: Path, known: dict) -> list[tuple[str, int]]:
    """(imported symjit module, line) for every import statement of the module."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            targets = [f"{mod}.{a.name}" for a in node.names]
        else:
            continue
        for t in targets:
            if t == "symjit" or t.startswith("symjit."):
                found.append((resolve(t, known), node.lineno))
    return found


def upward_imports() -> list[str]:
    known = all_modules()
    known["symjit._runtime"] = None      # the C extension
    bad = []
    for name, path in known.items():
        if path is None:
            continue
        src = layer(name)
        for target, line in imports_of(name, path, known):
            if layer(target) > src and (name, target) not in ALLOWED:
                bad.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {name} (layer {src}) imports "
                           f"{target} (layer {layer(target)})")
    return bad


def test_layer_table():
    assert layer("symjit.ir.graph") == 2 and layer("symjit.codegen.llvm.jit") == 5
    assert layer("symjit") == 9 and layer("symjit.gluon.block") == FRONTEND
    assert layer("symjit.random") == FRONTEND and layer("symjit.ops.rng") == 1


def test_scanner_sees_lazy_and_relative_imports(tmp_path):
    """The scanner resolves relative imports, names imported from a package, and imports inside
    functions (otherwise the layering test below would pass vacuously)."""
    src = "def f():\n    from ... import __version__\n    from ...ndarray import NDArray\n"
    path = PACKAGE / "codegen" / "llvm" / "_probe.py"
    known = {"symjit": PACKAGE / "__init__.py", "symjit.ndarray": PACKAGE / "ndarray" / "__init__.py",
             "symjit.codegen.llvm._probe": path}
    tmp = tmp_path / "_probe.py"
    tmp.write_text(src)
    found = imports_of("symjit.codegen.llvm._probe", tmp, known)
    assert [t for t, _ in found] == ["symjit", "symjit.ndarray"]


def test_no_upward_imports():
    bad = upward_imports()
    assert not bad, "imports from a lower layer into a higher one:\n" + "\n".join(bad)


def test_allowed_exceptions_are_still_needed():
    known = all_modules()
    for (src, target), why in ALLOWED.items():
        assert any(t == target for t, _ in imports_of(src, known[src], known)), (src, target, why)


@pytest.mark.parametrize("core", ["symjit.ir", "symjit.passes.manager", "symjit.codegen.llvm.executable"])
def test_importing_the_core_loads_no_frontend(core):
    code = (f"import sys, {core}\n"
            "print('\\n'.join(m for m in sys.modules if m == 'symjit' or m.startswith('symjit.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=PACKAGE.parent).stdout.split()
    assert "symjit.ops.registry" in out
    frontends = [m for m in out if layer(m) > CORE_MAX and m != "symjit"]
    assert not frontends, f"import {core} loaded {frontends}"


def private_names_used(name: str, path: Path) -> list[str]:
    """`from M import _x` and `m._x` (m an imported module) in one module: another module's
    private names, which a caller must not depend on."""
    tree = ast.parse(path.read_text(), str(path))
    modules, found = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for a in node.names:
                if a.name.startswith("_") and not a.name.startswith("__") and node.module != "__future__":
                    found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: imports {a.name}")
                else:
                    modules.add(a.asname or a.name)
        elif isinstance(node, ast.Import):
            modules.update((a.asname or a.name).split(".")[0] for a in node.names)
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules
                and node.attr.startswith("_") and not node.attr.startswith("__")):
            found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: uses {node.value.id}.{node.attr}")
    return found


def test_passes_and_codegen_use_no_private_names_of_other_modules():
    bad = [f for name, path in all_modules().items()
           if name.startswith(("symjit.passes", "symjit.codegen")) for f in private_names_used(name, path)]
    assert not bad, "\n".join(bad)
