#!/usr/bin/env bash
# Idempotent set-up of a development machine: venv, ROS 2 Kilted wheels, the
# CMake path fix, and a colcon build of robot_harness (plus the nav2_msgs
# stand-in where the real one is absent). Fast when nothing changed.
set -euo pipefail
# shellcheck source=/dev/null
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/_paths.sh"
ROOT="$RH_ROOT"; VENV="$RH_VENV"; WS="$RH_WS"
cd "$ROOT"
PY="${PYTHON:-python3.11}"
command -v "$PY" >/dev/null 2>&1 || PY=python3

log() { printf '[setup] %s\n' "$*" >&2; }

# 1. venv + wheels (re-run only when a requirements file changed).
if [ ! -x "$VENV/bin/python" ]; then
  log "creating venv at $VENV"
  mkdir -p "$(dirname "$VENV")"
  "$PY" -m venv "$VENV"
fi
req_hash="$RH_REQ_HASH"
if [ "$(cat "$VENV/.rh_requirements" 2>/dev/null)" != "$req_hash" ]; then
  log "installing Python and ROS 2 wheels"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check \
    -r requirements/ros.txt -r requirements/python.txt -r requirements/test.txt 2>&1 \
    | { grep -v "^WARNING: Location .* is ignored" || true; }
  rm -f "$VENV/.rh_cmake_fixed"
  echo "$req_hash" > "$VENV/.rh_requirements"
fi

# 2. The wheels' CMake files name their build-time prefix; point them at this venv.
if [ ! -f "$VENV/.rh_cmake_fixed" ]; then
  py_inc=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
  np_inc=$("$VENV/bin/python" -c 'import numpy; print(numpy.get_include())')
  log "rewriting wheel CMake paths -> $py_inc, $np_inc"
  grep -rl --include='*.cmake' '/opt/python/cp311-cp311' "$VENV/share" 2>/dev/null | while read -r f; do
    sed -i -e "s#/opt/python/cp311-cp311/lib/python3.11/site-packages/numpy/_core/include#$np_inc#g" \
           -e "s#/opt/python/cp311-cp311/include/python3.11#$py_inc#g" "$f"
  done
  touch "$VENV/.rh_cmake_fixed"
fi

# 3. colcon build (skipped when no build input changed).
# shellcheck source=/dev/null
source "$ROOT/scripts/_ros_env.sh" --no-install
paths=("$ROOT")
# The nav2_msgs stand-in only where no real nav2_msgs is on AMENT_PREFIX_PATH;
# with a real one, nav2_stub.sh removes a stub built earlier from $WS.
stub_paths=$(bash "$ROOT/scripts/nav2_stub.sh" "$WS")
[ -z "$stub_paths" ] || paths+=("$stub_paths")
# Interface and build files by content; Python, scripts, launch and config
# files by name only (they are symlinked into the install space, so editing
# one needs no rebuild, but adding one does).
build_hash=$( { printf '%s\n' "${paths[@]}";
  find CMakeLists.txt package.xml msg srv action stubs -type f -print0 | sort -z | xargs -0 sha256sum;
  find robot_harness bin launch config scenarios -type f -not -name '*.pyc' -not -path '*/__pycache__/*' | sort; } \
  | sha256sum | cut -c1-16)
# A removed or renamed interface leaves its generated Python behind in an
# incremental build (and the package then fails to import): rebuild clean.
iface_names=$(find msg srv action -type f | sort | sha256sum | cut -c1-16)
if [ "$(cat "$WS/.rh_build" 2>/dev/null)" != "$build_hash" ] || [ ! -f "$WS/install/setup.sh" ]; then
  if [ -d "$WS/install/robot_harness" ] && [ "$(cat "$WS/.rh_interfaces" 2>/dev/null)" != "$iface_names" ]; then
    log "the interface set changed: clean rebuild of robot_harness"
    rm -rf "$WS/build/robot_harness" "$WS/install/robot_harness"
  fi
  log "colcon build (${#paths[@]} package(s))"
  mkdir -p "$WS"
  ( cd "$WS" && "$VENV/bin/colcon" --log-base "$WS/log" build --symlink-install \
      --build-base "$WS/build" --install-base "$WS/install" --paths "${paths[@]}" \
      --cmake-args -DBUILD_TESTING=OFF -DPython3_EXECUTABLE="$VENV/bin/python" \
      --event-handlers console_cohesion- summary+ >"$WS/build.log" 2>&1 ) || {
        tail -50 "$WS/build.log" >&2; log "colcon build failed (full log: $WS/build.log)"; exit 1; }
  echo "$build_hash" > "$WS/.rh_build"
fi
echo "$iface_names" > "$WS/.rh_interfaces"

# 4. A browser for the dashboard's end-to-end test: Debian's Chromium, installed
# once when missing and this is root with apt (best effort; without it those
# tests skip and say why). RH_NO_BROWSER=1 skips this step.
if [ -z "${RH_NO_BROWSER:-}" ] && ! command -v chromium >/dev/null 2>&1 && [ ! -f "$VENV/.rh_browser_tried" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "installing Debian's chromium for the dashboard test (apt-get)"
    { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium; } \
      >"$VENV/.rh_browser.log" 2>&1 || log "chromium not installed (see $VENV/.rh_browser.log); the dashboard browser test will skip"
  else
    log "no chromium and no root apt: the dashboard browser test will skip"
  fi
  touch "$VENV/.rh_browser_tried"
fi

# 5. A PostgreSQL server for the journal's PostgreSQL backend tests (robot_harness/pgserver.py starts
# throw-away ones): Debian's, installed once when no server binaries are found and this is root with
# apt (best effort; without it those tests skip and say why). RH_NO_POSTGRES=1 skips this step.
pg_bindir() {  # robot_harness.pgserver.find_bindir, in bash
  local d
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k5,5 -rV); do
    [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && [ -x "$d/postgres" ] && { echo "$d"; return 0; }
  done
  d=$(pg_config --bindir 2>/dev/null) && [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && [ -x "$d/postgres" ] \
    && { echo "$d"; return 0; }
  d=$(command -v initdb 2>/dev/null) && d=$(dirname "$(readlink -f "$d")") && [ -x "$d/pg_ctl" ] \
    && [ -x "$d/postgres" ] && { echo "$d"; return 0; }
  return 1
}
if [ -z "${RH_NO_POSTGRES:-}" ] && ! pg_bindir >/dev/null && [ ! -f "$VENV/.rh_postgres_tried" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "installing Debian's postgresql for the PostgreSQL journal tests (apt-get)"
    { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends postgresql; } \
      >"$VENV/.rh_postgres.log" 2>&1 || log "postgresql not installed (see $VENV/.rh_postgres.log); the PostgreSQL tests will skip"
  else
    log "no PostgreSQL server and no root apt: the PostgreSQL tests will skip (apt-get install postgresql)"
  fi
  touch "$VENV/.rh_postgres_tried"
fi
log "ready: source scripts/env.sh"
