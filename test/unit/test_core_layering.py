"""The core's layering, read from the source (so a lazy import inside a function counts too):
``robot_harness/core`` imports nothing from the layers above it, starts no thread and reads no
clock of its own; the whole core, subpackages included, imports without ROS."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CORE = REPO / "robot_harness" / "core"
ABOVE = ("robot_harness.llm", "robot_harness.evidence", "robot_harness.nodes", "robot_harness.operator",
         "robot_harness.compose", "robot_harness.cli", "robot_harness.client", "robot_harness.bringup",
         "robot_harness.runner", "robot_harness.eval", "robot_harness.sim", "rclpy")
CLOCK_OWNERS = {"clock.py"}
"""The injected clock's real implementation is the one place in the core that may read the system's."""


def _module_name(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[int, str]]:
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    return _imports_in(path.read_text(), package)


def _imports_in(source: str, package: str) -> list[tuple[int, str]]:
    """Every module ``source`` (of a module in ``package``) imports, anywhere in it (top level or
    inside a function), with relative imports resolved."""
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            out.append((node.lineno, target))
            out += [(node.lineno, f"{target}.{a.name}") for a in node.names]
    return out


def _offending(found: list[tuple[int, str]]) -> list[str]:
    return [f"{line}: {name}" for line, name in found if name in ABOVE or name.startswith(tuple(a + "." for a in ABOVE))]


def _core_files() -> list[Path]:
    return sorted(p for p in CORE.rglob("*.py") if "__pycache__" not in p.parts)


def test_the_walk_catches_lazy_relative_and_absolute_imports_from_above():
    source = ("from ..journal import Journal\n"
              "def f():\n    from ...nodes import supervisor\n"
              "def g():\n    import rclpy\n"
              "class C:\n    def h(self):\n        from robot_harness.llm.client import ChatClient\n"
              "from .. import compose_like\n")
    found = _imports_in(source, "robot_harness.core.mission")
    assert (1, "robot_harness.core.journal") in found
    assert _offending(found) == ["3: robot_harness.nodes", "3: robot_harness.nodes.supervisor", "5: rclpy",
                                 "8: robot_harness.llm.client", "8: robot_harness.llm.client.ChatClient"]


def test_no_core_module_imports_from_the_layers_above_it():
    offenders = [f"{p.relative_to(REPO)}:{o}" for p in _core_files() for o in _offending(_imports(p))]
    assert offenders == [], "core must take these as injected collaborators (wire them in robot_harness/compose.py):\n" \
        + "\n".join(offenders)


def test_the_core_starts_no_thread_and_reads_no_clock_of_its_own():
    offenders = []
    for p in _core_files():
        if p.name in CLOCK_OWNERS:
            continue
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                what = f"{node.value.id}.{node.attr}"
                if what in ("threading.Thread", "time.time", "time.monotonic", "time.perf_counter", "time.sleep",
                            "datetime.now", "threading.Timer"):
                    offenders.append(f"{p.relative_to(REPO)}:{node.lineno}: {what}")
    assert offenders == [], "\n".join(offenders)


def test_every_core_module_subpackages_included_imports_without_ros():
    code = (
        "import sys, pkgutil, importlib, robot_harness.core as c\n"
        "for m in pkgutil.walk_packages(c.__path__, 'robot_harness.core.'):\n"
        "    importlib.import_module(m.name)\n"
        "bad = sorted(n for n in sys.modules if n.split('.')[0] in ('rclpy', 'rosidl_parser', 'nav2_msgs', 'geometry_msgs')"
        " or n.startswith(('robot_harness.msg', 'robot_harness.srv', 'robot_harness.action', 'robot_harness.nodes',"
        " 'robot_harness.llm', 'robot_harness.evidence', 'robot_harness.operator', 'robot_harness.compose')))\n"
        "print(bad)\n"
        "sys.exit(1 if bad else 0)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
