"""scripts/nav2_stub.sh, the switch between the nav2_msgs stand-in and a real nav2_msgs.

The stub is built once per module with colcon (as scripts/setup.sh builds it:
isolated install, --symlink-install) into a temporary workspace; each test
works on its own copy, so the checkout's .ws is never touched. A "real"
nav2_msgs is a temporary prefix laid out as a binary install is
(/opt/ros/kilted: share/nav2_msgs/package.xml, the ament index marker, a Python
package, a library directory) and put on AMENT_PREFIX_PATH. What a later
`source install/local_setup.bash` yields is read from a fresh bash, i.e. from
colcon's own generated setup files.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "nav2_stub.sh"
STUB_SRC = REPO / "stubs" / "nav2_msgs"
PATH_VARS = ("AMENT_PREFIX_PATH", "CMAKE_PREFIX_PATH", "COLCON_PREFIX_PATH", "PYTHONPATH", "LD_LIBRARY_PATH")
PY = f"python{sys.version_info.major}.{sys.version_info.minor}"


def _clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without any colcon workspace of this checkout (.ws) on the paths."""
    env = dict(os.environ)
    for var in PATH_VARS:
        kept = [p for p in env.get(var, "").split(os.pathsep) if p and "/.ws/" not in p + "/"]
        if kept:
            env[var] = os.pathsep.join(kept)
        else:
            env.pop(var, None)
    env.pop("COLCON_CURRENT_PREFIX", None)
    for var, value in extra.items():
        env[var] = value
    return env


def _prepend(env: dict[str, str], var: str, path: Path) -> None:
    env[var] = os.pathsep.join([str(path), *[p for p in env.get(var, "").split(os.pathsep) if p]])


@pytest.fixture(scope="module")
def built_ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace with the stub built by colcon, the way setup.sh builds it."""
    colcon = Path(sys.executable).parent / "colcon"
    if not colcon.is_file():
        pytest.skip(f"no colcon next to {sys.executable}: run scripts/setup.sh and source scripts/env.sh")
    ws = tmp_path_factory.mktemp("stub_ws")
    proc = subprocess.run(
        [str(colcon), "--log-base", str(ws / "log"), "build", "--symlink-install",
         "--build-base", str(ws / "build"), "--install-base", str(ws / "install"), "--paths", str(STUB_SRC),
         "--cmake-args", "-DBUILD_TESTING=OFF", f"-DPython3_EXECUTABLE={sys.executable}"],
        cwd=ws, env=_clean_env(), capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (ws / "install" / "nav2_msgs" / "share" / "colcon-core" / "packages" / "nav2_msgs").is_file()
    return ws


@pytest.fixture
def ws(built_ws: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "ws"
    shutil.copytree(built_ws, copy, symlinks=True)
    (copy / ".rh_build").write_text("0123456789abcdef\n")
    return copy


@pytest.fixture
def real_prefix(tmp_path: Path) -> Path:
    """A prefix holding a (Python-only) real nav2_msgs, as a Debian install of Kilted's would lay it out."""
    prefix = tmp_path / "opt_ros_kilted"
    share = prefix / "share" / "nav2_msgs"
    share.mkdir(parents=True)
    (share / "package.xml").write_text(textwrap.dedent("""\
        <?xml version="1.0"?>
        <package format="3">
          <name>nav2_msgs</name>
          <version>1.4.2</version>
          <description>Messages and service files for the Nav2 stack</description>
          <maintainer email="x@example.com">x</maintainer>
          <license>Apache-2.0</license>
        </package>
        """))
    index = prefix / "share" / "ament_index" / "resource_index" / "packages"
    index.mkdir(parents=True)
    (index / "nav2_msgs").write_text("")
    pkg = prefix / "lib" / PY / "site-packages" / "nav2_msgs"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("REAL_NAV2_MSGS = True\n")
    return prefix


def _env_with_real(real_prefix: Path) -> dict[str, str]:
    env = _clean_env()
    _prepend(env, "AMENT_PREFIX_PATH", real_prefix)
    _prepend(env, "CMAKE_PREFIX_PATH", real_prefix)
    _prepend(env, "PYTHONPATH", real_prefix / "lib" / PY / "site-packages")
    _prepend(env, "LD_LIBRARY_PATH", real_prefix / "lib")
    return env


def _run_switch(ws: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), str(ws)], env=env, capture_output=True, text=True,
                          timeout=30, check=False)


_PROBE = textwrap.dedent("""\
    import json, os, nav2_msgs
    from ament_index_python.packages import get_package_prefix
    out = {v: [p for p in os.environ.get(v, "").split(os.pathsep) if p] for v in %r}
    out["module"] = nav2_msgs.__file__
    out["ament_prefix"] = get_package_prefix("nav2_msgs")
    out["real"] = getattr(nav2_msgs, "REAL_NAV2_MSGS", False)
    try:
        from nav2_msgs.action import NavigateToPose
        out["feedback"] = list(NavigateToPose.Feedback.get_fields_and_field_types())
    except ImportError as exc:
        out["feedback"] = str(exc)
    print(json.dumps(out))
    """) % (PATH_VARS,)


def _sourced(ws: Path, env: dict[str, str]) -> dict:
    """What a fresh shell sees after `source WS/install/local_setup.bash` (colcon's generated files)."""
    import json

    script = f'source "{ws}/install/local_setup.bash" && exec "{sys.executable}" -c "$PROBE"'
    proc = subprocess.run(["bash", "-c", script], env={**env, "PROBE": _PROBE}, capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _mentions(paths: list[str], root: Path) -> list[str]:
    return [p for p in paths if Path(p).is_relative_to(root) or str(root) in p]


def test_without_a_real_nav2_msgs_the_stub_is_built_and_kept(ws: Path) -> None:
    env = _clean_env()
    proc = _run_switch(ws, env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [str(STUB_SRC)], "setup.sh must add the stub to colcon's --paths"
    assert "no real nav2_msgs" in proc.stderr
    assert (ws / "install" / "nav2_msgs").is_dir() and (ws / "build" / "nav2_msgs").is_dir()
    assert (ws / ".rh_build").is_file()
    seen = _sourced(ws, env)
    stub_prefix = ws / "install" / "nav2_msgs"
    assert seen["ament_prefix"] == str(stub_prefix)
    assert Path(seen["module"]).is_relative_to(stub_prefix) and not seen["real"]
    assert seen["feedback"] == ["current_pose", "navigation_time", "estimated_time_remaining",
                                "number_of_recoveries", "distance_remaining"]


def test_with_a_real_nav2_msgs_the_stub_is_removed_and_only_the_real_one_resolves(ws: Path, real_prefix: Path) -> None:
    env = _env_with_real(real_prefix)
    stub_prefix = ws / "install" / "nav2_msgs"
    # Before the switch the workspace's setup files put the stub first on every path (the control:
    # the checks below would see it).
    before = _sourced(ws, env)
    assert before["ament_prefix"] == str(stub_prefix)
    for var in ("AMENT_PREFIX_PATH", "PYTHONPATH", "LD_LIBRARY_PATH", "CMAKE_PREFIX_PATH"):
        assert _mentions(before[var], stub_prefix), var

    proc = _run_switch(ws, env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "", "with a real nav2_msgs, setup.sh must not build the stub"
    assert f"real nav2_msgs found at {real_prefix}" in proc.stderr
    assert "removing the stub built earlier" in proc.stderr
    assert not (ws / "install" / "nav2_msgs").exists() and not (ws / "build" / "nav2_msgs").exists()
    assert not (ws / ".rh_build").exists(), "setup.sh must rebuild (its build hash named the stub)"

    after = _sourced(ws, env)
    for var in PATH_VARS:
        assert not _mentions(after.get(var, []), stub_prefix), (var, after.get(var))
    assert after["ament_prefix"] == str(real_prefix)
    assert after["real"] and Path(after["module"]).is_relative_to(real_prefix)

    again = _run_switch(ws, env)
    assert again.returncode == 0 and again.stdout == "" and "removing" not in again.stderr


def test_a_stub_elsewhere_on_the_path_is_not_a_real_one(ws: Path, built_ws: Path) -> None:
    """Another checkout's stub (same package.xml) on AMENT_PREFIX_PATH must not pass for Nav2."""
    other = built_ws / "install" / "nav2_msgs"
    env = _clean_env()
    _prepend(env, "AMENT_PREFIX_PATH", other)
    proc = _run_switch(ws, env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [str(STUB_SRC)]
    assert (ws / "install" / "nav2_msgs").is_dir()


def test_a_merged_install_space_holding_the_stub_is_removed_whole(tmp_path: Path, real_prefix: Path) -> None:
    """A merged install mixes the stub's files with every package's: nothing short of removing it is clean."""
    ws = tmp_path / "merged"
    (ws / "install" / "share" / "colcon-core" / "packages").mkdir(parents=True)
    (ws / "install" / ".colcon_install_layout").write_text("merged\n")
    (ws / "install" / "share" / "colcon-core" / "packages" / "nav2_msgs").write_text("")
    (ws / "build" / "nav2_msgs").mkdir(parents=True)
    (ws / ".rh_build").write_text("x\n")
    proc = _run_switch(ws, _env_with_real(real_prefix))
    assert proc.returncode == 0, proc.stderr
    assert "merged install space" in proc.stderr
    assert not (ws / "install").exists() and not (ws / "build").exists() and not (ws / ".rh_build").exists()


def test_usage_error() -> None:
    proc = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == 2 and "usage:" in proc.stderr and proc.stdout == ""


def test_setup_uses_the_switch() -> None:
    """setup.sh takes the stub decision from nav2_stub.sh (not a second, diverging check of its own)."""
    setup = (REPO / "scripts" / "setup.sh").read_text(encoding="utf-8")
    assert 'bash "$ROOT/scripts/nav2_stub.sh" "$WS"' in setup
    assert "stubs/nav2_msgs" not in setup
