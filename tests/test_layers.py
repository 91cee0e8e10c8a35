"""The layers of the code, read from its source: no library module imports a command-line module (or
argparse: a library takes typed options, never a parsed Namespace), and the project's modules import
each other in no circle (the imports inside functions too: a lazy import is still a dependency)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("lmbench", "corpora", "baselines", "neural", "mixing", "reports", "lmbench_cli")


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(path: Path) -> set[str]:
    """Every module (or module.name) the file imports, at its top or inside a function."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def is_cli(name: str) -> bool:
    """The command-line layer: lmbench_cli, each package's cli module, the option types they share, and a
    module run as a script of its own (`python -m reports.building.page_check`)."""
    path = modules().get(name)
    script = path is not None and 'if __name__ == "__main__"' in path.read_text()
    return name.split(".")[0] == "lmbench_cli" or name.split(".")[-1] == "cli" or name == "lmbench.options" or script


def test_no_library_module_imports_a_command_line_module():
    offenders = {name: sorted(i for i in imports(path) if is_cli(i) or i == "argparse")
                 for name, path in modules().items() if not is_cli(name)}
    assert {name: found for name, found in offenders.items() if found} == {}


def test_the_imports_form_no_circle():
    known = modules()
    graph = {name: {i for i in imports(path) if i in known and i != name} for name, path in known.items()}
    state: dict[str, int] = {}  # 1: on the path being walked, 2: done

    def walk(name: str, path: list[str]) -> list[str] | None:
        state[name] = 1
        for other in sorted(graph[name]):
            if state.get(other) == 1:
                return path + [name, other]
            if other not in state and (circle := walk(other, path + [name])):
                return circle
        state[name] = 2
        return None

    for name in sorted(graph):
        if name not in state:
            circle = walk(name, [])
            assert circle is None, " -> ".join(circle)
