"""The package's shape (DESIGN.md): no import cycle, no function-level import of posenc modules
outside the CLIs' lazy subcommand loading. Read from the source with ast."""

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
DATA_MODULES: set[str] = set()
# posenc modules that need an optional dependency at import (triton): loaded where used.
OPTIONAL = {"posenc.kernels.triton_rope"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted((SRC / "posenc").rglob("*.py"))}


def imported(node: ast.AST, module: str, is_package: bool) -> list[str]:
    """The posenc modules an import statement names (resolving relative imports)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            pkg = module.split(".") if is_package else module.split(".")[:-1]
            pkg = pkg[: len(pkg) - node.level + 1]
            base = ".".join(pkg + ([base] if base else []))
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
    else:
        return []
    return [n for n in names if n == "posenc" or n.startswith("posenc.")]


def imports_of(module: str) -> tuple[set[str], list[tuple[int, str]]]:
    """(modules imported at module level, [(line, module)] imported inside functions)."""
    path = MODULES[module]
    tree = ast.parse(path.read_text())
    top, inner = set(), []
    is_package = path.name == "__init__.py"
    for node in tree.body:
        for n in ast.walk(node) if not isinstance(node, ast.FunctionDef | ast.ClassDef) else []:
            top.update(imported(n, module, is_package))
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            for n in ast.walk(fn):
                inner.extend((n.lineno, m) for m in imported(n, module, is_package))
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        for n in cls.body:
            if isinstance(n, ast.Import | ast.ImportFrom):
                top.update(imported(n, module, is_package))
    return top, inner


def graph() -> dict[str, set[str]]:
    """module -> the posenc modules its module-level imports load (a package's __init__ too)."""
    edges = {}
    for m in MODULES:
        deps = set()
        for d in imports_of(m)[0]:
            # importing posenc.a.b runs posenc/__init__ and posenc/a/__init__ first
            parts = d.split(".")
            deps.update(".".join(parts[: i + 1]) for i in range(len(parts)))
        edges[m] = {d for d in deps if d in MODULES and d != m and not m.startswith(d + ".")}
    return edges


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state, stack = {}, []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for d in sorted(edges[m]):
            if state.get(d) == 1:
                return stack[stack.index(d) :] + [d]
            if d not in state and (cycle := visit(d)):
                return cycle
        state[m] = 2
        stack.pop()
        return None

    for m in sorted(edges):
        if m not in state and (cycle := visit(m)):
            return cycle
    return None


def test_no_import_cycle():
    assert find_cycle(graph()) is None, " -> ".join(find_cycle(graph()))


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_function_level_imports_of_posenc_outside_the_clis():
    found = [
        f"{m}:{line} imports {dep}"
        for m in MODULES
        if not m.endswith(".cli")
        for line, dep in imports_of(m)[1]
        if dep not in OPTIONAL
    ]
    assert not found, "\n".join(found)
