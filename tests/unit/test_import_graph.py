"""Imports run one way (docs/architecture.md): every import of a project module, also those inside
functions and under TYPE_CHECKING, is an arrow of the graph. The core (mpstream/, but the CLI,
the composition root that names every command) imports no part; a part imports the core and the
parts below it, in the order LAYERS gives; and no module reaches itself again."""

from __future__ import annotations

import ast
from pathlib import Path

from mpstream.paths import REPO_ROOT

# The parts, lowest first: each may import the ones before it, never one after.
LAYERS = ("manifests", "encoder", "netem", "server", "player", "runner")
COMPOSITION_ROOT = "mpstream.cli"


def module_files(root: Path = REPO_ROOT) -> dict[str, Path]:
    """Dotted name (as installed: mpstream.<part>.…) -> file, for the core and every part."""
    found = {}
    for folder in ("mpstream", *LAYERS):
        for path in (root / folder).rglob("*.py"):
            if {"node_modules", "__pycache__"} & set(path.parts):
                continue
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[0] != "mpstream":
                parts.insert(0, "mpstream")
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def imported(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules `name` imports anywhere in its file."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def graph() -> dict[str, set[str]]:
    modules = module_files()
    return {name: imported(name, path, modules) for name, path in modules.items()}


def part_of(name: str) -> str | None:
    """The part a module belongs to (None: the core)."""
    segments = name.split(".")
    return segments[1] if len(segments) > 1 and segments[1] in LAYERS else None


def arrows_against_the_layers(g: dict[str, set[str]]) -> list[str]:
    bad = []
    for name, targets in g.items():
        if name == COMPOSITION_ROOT:
            continue
        mine = part_of(name)
        for target in targets:
            theirs = part_of(target)
            if theirs is None or theirs == mine:
                continue
            if mine is None or LAYERS.index(theirs) > LAYERS.index(mine):
                bad.append(f"{name} ({mine or 'core'}) imports {target} ({theirs})")
    return sorted(bad)


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module. A package and its own
    submodules are one unit here: a registry package names its plugins' interface for the type
    checker only, and Python imports a package before its submodules anyway."""
    def related(a: str, b: str) -> bool:
        return a.startswith(b + ".") or b.startswith(a + ".")

    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(g[v]):
            if related(v, w):
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return found


def test_no_module_reaches_itself_again():
    assert cycles(graph()) == []


def test_the_core_imports_no_part_and_each_part_only_those_below_it():
    assert arrows_against_the_layers(graph()) == []


def test_the_checks_see_a_cycle_and_an_arrow_the_wrong_way():
    g = {"mpstream.a": {"mpstream.b"}, "mpstream.b": {"mpstream.a"},
         "mpstream.netem.x": {"mpstream.runner.y"}, "mpstream.runner.y": set(),
         "mpstream.c": {"mpstream.player.z"}, "mpstream.player.z": set()}
    assert cycles(g) == [["mpstream.a", "mpstream.b"]]
    assert arrows_against_the_layers(g) == [
        "mpstream.c (core) imports mpstream.player.z (player)",
        "mpstream.netem.x (netem) imports mpstream.runner.y (runner)"]


def test_imports_inside_functions_count(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from mpstream.runner import trial\n")
    modules = {"mpstream.runner.trial": Path("trial.py"), "mpstream.m": source}
    assert imported("mpstream.m", source, modules) == {"mpstream.runner.trial"}
