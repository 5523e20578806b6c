#!/usr/bin/env bash
# nav2_stub.sh WS — decide whether the colcon workspace WS needs the test-only
# nav2_msgs stand-in (stubs/nav2_msgs), and keep WS consistent with the answer.
#
# stdout: the package path to add to `colcon build --paths` (the stub's source
#         directory) when no real nav2_msgs is found; nothing when one is.
# stderr: what was decided and removed, one "[setup] ..." line each.
# exit:   0; 2 on a usage error.
#
# A "real" nav2_msgs is a prefix on AMENT_PREFIX_PATH holding
# share/nav2_msgs/package.xml that is neither inside WS/install nor a build of
# our stub (recognised by the stub's package.xml description), e.g.
# /opt/ros/kilted. When one is found, a stub built earlier is removed: colcon's
# isolated install space lists its packages by scanning WS/install/<pkg>/
# share/colcon-core/packages/<pkg> on every `source local_setup.*`
# (_local_setup_util_sh.py, get_packages), so deleting WS/install/nav2_msgs and
# WS/build/nav2_msgs takes the stub off AMENT_PREFIX_PATH, PYTHONPATH,
# LD_LIBRARY_PATH and CMAKE_PREFIX_PATH of every later source. A merged install
# space mixes the stub's files with the other packages' and cannot be cleaned
# per package, so it is removed whole (with the build space) and setup.sh
# rebuilds it. WS/.rh_build is dropped either way, so setup.sh rebuilds and its
# build hash no longer names the stub.
set -euo pipefail

log() { printf '[setup] %s\n' "$*" >&2; }

if [ $# -ne 1 ] || [ -z "$1" ]; then
  printf 'usage: %s WORKSPACE\n' "$(basename "$0")" >&2
  exit 2
fi
ws="${1%/}"
stub_src="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/stubs/nav2_msgs"
# The stub's package.xml says this; the real one never does.
stub_marker="Test-only stand-in for Nav2's nav2_msgs"

real=""
IFS=: read -r -a prefixes <<< "${AMENT_PREFIX_PATH:-}"
for prefix in "${prefixes[@]}"; do
  prefix="${prefix%/}"
  [ -n "$prefix" ] || continue
  case "$prefix/" in "$ws/install/"*) continue;; esac
  manifest="$prefix/share/nav2_msgs/package.xml"
  [ -f "$manifest" ] || continue
  grep -qF "$stub_marker" "$manifest" && continue
  real="$prefix"
  break
done

if [ -z "$real" ]; then
  log "no real nav2_msgs on AMENT_PREFIX_PATH: building/keeping the stub ($stub_src)"
  printf '%s\n' "$stub_src"
  exit 0
fi

log "real nav2_msgs found at $real: the stub is not built"
if [ "$(cat "$ws/install/.colcon_install_layout" 2>/dev/null)" = merged ]; then
  if [ -e "$ws/install/share/colcon-core/packages/nav2_msgs" ]; then
    log "removing the merged install space holding a stub nav2_msgs: rm -rf $ws/install $ws/build (setup rebuilds them)"
    rm -rf "$ws/install" "$ws/build"
    rm -f "$ws/.rh_build"
  fi
elif [ -f "$ws/install/nav2_msgs/share/nav2_msgs/package.xml" ] \
     && ! grep -qF "$stub_marker" "$ws/install/nav2_msgs/share/nav2_msgs/package.xml"; then
  log "$ws/install/nav2_msgs is not the stub: left alone"
elif [ -e "$ws/install/nav2_msgs" ] || [ -e "$ws/build/nav2_msgs" ]; then
  log "removing the stub built earlier: rm -rf $ws/build/nav2_msgs $ws/install/nav2_msgs"
  rm -rf "$ws/build/nav2_msgs" "$ws/install/nav2_msgs"
  rm -f "$ws/.rh_build"
fi
