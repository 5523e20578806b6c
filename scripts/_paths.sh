# Sourced: where this checkout's venv and colcon workspace live.
# The venv must live outside the source tree (CMake refuses include paths
# inside a package's source directory), so it goes to a per-user cache keyed
# by the requirements' content: clones with the same requirements share it.
_rh_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RH_ROOT="$_rh_root"
RH_REQ_HASH=$(cat "$_rh_root"/requirements/*.txt | sha256sum | cut -c1-12)
RH_VENV="${ROBOT_HARNESS_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/robot_harness/venv-$RH_REQ_HASH}"
RH_WS="$_rh_root/.ws"
unset _rh_root
