"""Evaluate a launch file through the stand-ins and run its nodes as real processes.

    with use_standins():
        with launch_graph(path, {"use_sim": "true"}) as launched: ...

Visiting follows launch's LaunchService: entities depth first, each action's returned entities visited
before the next sibling; conditions checked before execution. Shutdown follows ros2 launch on Ctrl-C
(launch/actions/execute_local.py, 3.7): SIGINT to every process, SIGTERM after ``sigterm_timeout``
(default 5 s), SIGKILL after ``sigkill_timeout`` more (default 5 s).
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

HERE = Path(__file__).resolve().parent
SIGTERM_TIMEOUT = 5.0
SIGKILL_TIMEOUT = 5.0


@contextlib.contextmanager
def use_standins() -> Iterator[None]:
    """Put this directory first on sys.path for the block (and drop any cached launch modules)."""
    names = ("launch", "launch_ros")
    saved = {k: v for k, v in sys.modules.items() if k.split(".")[0] in names}
    for k in saved:
        del sys.modules[k]
    sys.path.insert(0, str(HERE))
    try:
        yield
    finally:
        sys.path.remove(str(HERE))
        for k in [k for k in sys.modules if k.split(".")[0] in names]:
            del sys.modules[k]
        sys.modules.update(saved)


def parse_launch_arguments(argv: list[str]) -> dict[str, str]:
    """``name:=value`` pairs as ros2 launch takes them; anything else is an error."""
    out = {}
    for a in argv:
        if ":=" not in a:
            raise ValueError(f"malformed launch argument '{a}', expected format '<name>:=<value>'")
        k, v = a.split(":=", 1)
        out[k] = v
    return out


def load_description(launch_file: Path) -> Any:
    spec = importlib.util.spec_from_file_location(f"launch_file_{abs(hash(str(launch_file)))}", launch_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.generate_launch_description()


def evaluate(description: Any, arguments: dict[str, str]) -> tuple[Any, list[Any]]:
    """Visit the description; return (context, Node actions that executed, in start order)."""
    import launch

    context = launch.LaunchContext()
    context.launch_configurations.update({str(k): str(v) for k, v in arguments.items()})

    def visit(entity: Any) -> None:
        if isinstance(entity, launch.LaunchDescription):
            children = entity.visit(context)
        else:
            children = entity.visit(context)
        for child in children or []:
            visit(child)

    visit(description)
    return context, list(context.locals.get("started_nodes", []))


@dataclass
class Proc:
    action: Any
    cmd: list[str]
    popen: subprocess.Popen | None = None
    output: list[str] = field(default_factory=list)
    starts: int = 0
    returncodes: list[int] = field(default_factory=list)

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen else None

    @property
    def returncode(self) -> int | None:
        return self.popen.poll() if self.popen else None

    @property
    def name(self) -> str:
        return self.action.expanded_node_name or self.action.executable

    def text(self) -> str:
        return "".join(self.output)


class Launched:
    def __init__(self, procs: list[Proc], env: dict[str, str]) -> None:
        self.procs, self.env = procs, env
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self.all_pids: set[int] = set()

    def __getitem__(self, name: str) -> Proc:
        for p in self.procs:
            if p.name == name or p.action.executable == name:
                return p
        raise KeyError(name)

    def _start(self, p: Proc) -> None:
        p.popen = subprocess.Popen(p.cmd, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True, start_new_session=True)
        p.starts += 1
        self.all_pids.add(p.popen.pid)
        t = threading.Thread(target=self._watch, args=(p, p.popen), daemon=True)
        t.start()
        self._threads.append(t)

    def _watch(self, p: Proc, popen: subprocess.Popen) -> None:
        for line in popen.stdout:
            p.output.append(line)
        rc = popen.wait()
        p.returncodes.append(rc)
        if p.action.respawn_value and not self._stopping.is_set():
            # execute_local.py: respawn after respawn_delay unless shutting down
            if not self._stopping.wait(p.action.respawn_delay_value):
                self._start(p)

    def start(self) -> "Launched":
        for p in self.procs:
            self._start(p)
        return self

    def shutdown(self, sigterm_timeout: float = SIGTERM_TIMEOUT, sigkill_timeout: float = SIGKILL_TIMEOUT) -> None:
        self._stopping.set()
        live = [p for p in self.procs if p.popen and p.popen.poll() is None]
        for sig, wait in ((signal.SIGINT, sigterm_timeout), (signal.SIGTERM, sigkill_timeout),
                          (signal.SIGKILL, 5.0)):
            for p in live:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.popen.pid, sig)
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline and any(p.popen.poll() is None for p in live):
                time.sleep(0.05)
            live = [p for p in live if p.popen.poll() is None]
            if not live:
                break
        for t in self._threads:
            t.join(timeout=2.0)
        for p in self.procs:
            for f in p.action.generated_param_files:
                with contextlib.suppress(OSError):
                    os.unlink(f)


@contextlib.contextmanager
def launch_graph(launch_file: Path, arguments: dict[str, str], *, env: dict[str, str] | None = None,
                 sigterm_timeout: float = SIGTERM_TIMEOUT) -> Iterator[Launched]:
    with use_standins():
        context, nodes = evaluate(load_description(Path(launch_file)), arguments)
    launched = Launched([Proc(n, list(n.cmd)) for n in nodes], dict(env or os.environ))
    try:
        yield launched.start()
    finally:
        launched.shutdown(sigterm_timeout=sigterm_timeout)
