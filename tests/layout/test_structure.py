"""The layout rules, checked on the source tree: no import cycle among the modules of aot/ and
codegen_c/ (function-local imports count), the two backends never reach each other, the graph IR
knows no op definitions, op semantics know no schedules, the board layer exports below the public
API, no hidden state (ContextVar, registry redefinition), no Python file over 800 lines."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("aot", "codegen_c")
MAX_LINES = 800


def module_files(root: Path = ROOT) -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for p in sorted((root / pkg).rglob("*.py")):
            if "_assets" in p.parts:
                continue
            parts = list(p.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = p
    return out


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """module -> modules of this tree it imports anywhere in its body (executing `from a.b import c`
    runs a.b, and a.b.c too when c is a submodule)."""
    mods = module_files(root)
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for t in targets:
                # a module's own ancestor packages run before it in any case: not an edge
                if t in mods and t != m and not m.startswith(t + "."):
                    graph[m].add(t)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [m for m in graph if m == start or m.startswith(start + ".")]
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo.extend(graph[m])
    return seen


def test_no_import_cycles() -> None:
    assert cycles(import_graph()) == []


def test_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


RULES = [("aot.llvm", "codegen_c"), ("codegen_c", "aot.llvm"), ("aot.memory", "aot.ir"), ("aot.memory", "aot.kernel"),
         ("aot.ir", "codegen_c"), ("aot.kernel", "codegen_c"), ("aot.lower", "codegen_c"), ("aot.lower", "aot.llvm"),
         # the graph IR knows no op definitions (the builder and the oracle live above aot.ops)
         ("aot.ir", "aot.ops"),
         # op semantics know no schedules (requantization constants: aot.quant.requant)
         ("aot.ops", "aot.lower"), ("aot.quant", "aot.lower"),
         # the board layer exports through aot.artifact.export, not the public API above it
         ("aot.board", "aot.api")]


def violations(graph: dict[str, set[str]], start: str, forbidden: str) -> list[str]:
    """The modules of `forbidden` (a package or module) that `start`'s modules reach."""
    reached = reachable(graph, start)
    return sorted(m for m in reached if m == forbidden or m.startswith(forbidden + "."))


@pytest.mark.parametrize("start, forbidden", RULES)
def test_dependency_rules(start: str, forbidden: str) -> None:
    bad = violations(import_graph(), start, forbidden)
    assert not bad, f"{start} reaches {bad}"


def test_rule_checker_finds_a_forbidden_import(tmp_path: Path) -> None:
    """The checker on a synthetic tree laid out as this one was: aot/ir/builder.py importing the op
    registry (function-local), aot/ops/quantized.py importing the schedules' requantization module."""
    files = {"aot/__init__.py": "", "aot/ir/__init__.py": "from aot.ir.graph import Model\n",
             "aot/ir/graph.py": "class Model: ...\n",
             "aot/ir/builder.py": "def op():\n    from aot.ops import REGISTRY\n    return REGISTRY\n",
             "aot/ops/__init__.py": "from aot.ops.quantized import q\nREGISTRY = {}\n",
             "aot/ops/quantized.py": "from aot.lower.schedule.requant import q31_constants as q\n",
             "aot/lower/__init__.py": "", "aot/lower/schedule/__init__.py": "",
             "aot/lower/schedule/requant.py": "from aot.ir import Model\ndef q31_constants(): ...\n",
             "codegen_c/__init__.py": ""}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    graph = import_graph(tmp_path)
    assert violations(graph, "aot.ir", "aot.ops") == ["aot.ops", "aot.ops.quantized"]
    assert violations(graph, "aot.ops", "aot.lower") == ["aot.lower.schedule.requant"]
    assert violations(graph, "aot.lower", "aot.ops") == []  # reaching aot.ir is allowed
    (tmp_path / "aot/ir/builder.py").unlink()
    assert violations(import_graph(tmp_path), "aot.ir", "aot.ops") == []


def test_no_hidden_state() -> None:
    for m, path in module_files().items():
        text = path.read_text()
        assert "ContextVar" not in text, m
        assert ".redefine(" not in text, m


def test_no_python_file_over_800_lines() -> None:
    files = [p for pkg in (*PACKAGES, "tests", "tools") for p in (ROOT / pkg).rglob("*.py") if "_assets" not in p.parts]
    long = {str(p.relative_to(ROOT)): n for p in files if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_no_absolute_machine_paths() -> None:
    """Code and tests find ../shared through tests/conftest.py (SHARED, AOT_SHARED), never through
    this machine's absolute paths: in a checkout elsewhere a glob of /work/... finds nothing and
    the tests built on it pass without running."""
    files = [p for pkg in (*PACKAGES, "tests", "tools") for p in (ROOT / pkg).rglob("*.py") if "_assets" not in p.parts]
    bad = [str(p.relative_to(ROOT)) for p in files if "/work/" in p.read_text() and p.name != "test_structure.py"]
    assert bad == []


def test_readme_layout_lists_every_package() -> None:
    """The design notes' layout section names every package directory under aot/ and every test topic."""
    readme = (ROOT / "docs" / "design.md").read_text()
    layout = readme[readme.index("## Layout"):]
    layout = layout[:layout.index("```", layout.index("```") + 3)]
    pkgs = sorted(p.name for p in (ROOT / "aot").iterdir() if (p / "__init__.py").is_file())
    missing = [p for p in pkgs if f"  {p}/" not in layout]
    assert not missing, f"docs/design.md layout does not list aot/{missing}"
    topics = sorted(p.name for p in (ROOT / "tests").iterdir() if p.is_dir() and any(p.glob("test_*.py")))
    assert all(t in layout for t in topics), topics
    assert not list((ROOT / "tests").glob("test_*.py")), "tests belong in a topic directory"
