"""No import circle between two modules of memory_plugin.

What counts: every import statement of one memory_plugin module naming another, wherever it stands (at the
top, inside a function, under ``if TYPE_CHECKING:``), as grimp reads them.  A type-only import counts too: it
still ties the two modules together, and the circle ``ml.chat`` <-> ``ml.service`` was one.  What Python does
implicitly (importing ``a.b.c`` runs ``a/__init__`` and ``a/b/__init__``) does not count; an explicit import of
a package does.  The ``No import circles`` contract of lint-imports forbids the same circles between sibling
packages; this names the modules and lines of each.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import grimp
import pytest


def import_cycles(graph: grimp.ImportGraph, modules: Iterable[str]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative), each sorted."""
    nodes = sorted(modules)
    edges = {node: sorted(graph.find_modules_directly_imported_by(node) & set(nodes)) for node in nodes}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for root in nodes:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, child = work.pop()
            if child == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            if child < len(edges[node]):
                work.append((node, child + 1))
                nxt = edges[node][child]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles


def describe(graph: grimp.ImportGraph, cycle: list[str]) -> str:
    members = set(cycle)
    lines = []
    for importer in cycle:
        for imported in sorted(graph.find_modules_directly_imported_by(importer) & members):
            for detail in graph.get_import_details(importer=importer, imported=imported):
                lines.append(f"  {importer}:{detail['line_number']}  {detail['line_contents']}")
    return "\n".join(lines)


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("memory_plugin", cache_dir=None)


def test_memory_plugin_has_no_import_cycle(graph: grimp.ImportGraph) -> None:
    cycles = import_cycles(graph, (m for m in graph.modules if m.split(".")[0] == "memory_plugin"))
    assert not cycles, "import circles:\n" + "\n\n".join(describe(graph, cycle) for cycle in cycles)


def test_imports_inside_functions_and_under_type_checking_make_a_circle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The graph holds what this test counts: here neither import runs at import time, and still a circle."""
    package = tmp_path / "circled"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text(
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from circled.b import B\n"
    )
    (package / "b.py").write_text("def later() -> None:\n    from circled import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    graph = grimp.build_graph("circled", cache_dir=None)
    assert import_cycles(graph, graph.modules) == [["circled.a", "circled.b"]]


def test_cycles_are_found_whatever_their_length() -> None:
    graph = grimp.ImportGraph()
    for module in ("p", "p.a", "p.b", "p.c", "p.d", "p.e", "p.f"):
        graph.add_module(module)
    for importer, imported in [("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.c", "p.d"), ("p.e", "p.f")]:
        graph.add_import(importer=importer, imported=imported)
    graph.add_import(importer="p.f", imported="p.e", line_number=3, line_contents="from p.e import X")
    assert import_cycles(graph, graph.modules) == [["p.a", "p.b", "p.c"], ["p.e", "p.f"]]
    assert "p.f:3  from p.e import X" in describe(graph, ["p.e", "p.f"])
