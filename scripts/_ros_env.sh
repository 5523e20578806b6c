# Sourced (not executed): puts the venv's ROS 2 wheels, and the colcon install
# space when it exists, on the environment. Used by env.sh and setup.sh.
# shellcheck source=/dev/null
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/_paths.sh"
_rh_root="$RH_ROOT"
_rh_venv="$RH_VENV"
export VIRTUAL_ENV="$_rh_venv"
case ":$PATH:" in *":$_rh_venv/bin:"*) ;; *) export PATH="$_rh_venv/bin:$PATH";; esac
case ":${AMENT_PREFIX_PATH:-}:" in *":$_rh_venv:"*) ;; *) export AMENT_PREFIX_PATH="$_rh_venv${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}";; esac
case ":${CMAKE_PREFIX_PATH:-}:" in *":$_rh_venv:"*) ;; *) export CMAKE_PREFIX_PATH="$_rh_venv${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}";; esac
export RMW_IMPLEMENTATION="${RMW_IMPLEMENTATION:-rmw_fastrtps_cpp}"
# Every DDS participant started from this checkout stays on loopback.
export FASTDDS_DEFAULT_PROFILES_FILE="$_rh_root/config/fastdds_loopback.xml"
# The profile alone confines discovery to 127.0.0.1. ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
# would make rmw_fastrtps add transports of its own, which bind the host's other
# interfaces too (measured: a socket on eth0's address and one on 0.0.0.0; see
# test/integration/test_loopback.py), so the range is pinned and static peers cleared.
export ROS_AUTOMATIC_DISCOVERY_RANGE=SUBNET
unset ROS_STATIC_PEERS
if [ "${1:-}" != "--no-install" ] && [ -f "$_rh_root/.ws/install/local_setup.bash" ]; then
  # shellcheck source=/dev/null
  COLCON_CURRENT_PREFIX="$_rh_root/.ws/install" source "$_rh_root/.ws/install/local_setup.bash"
fi
unset _rh_root _rh_venv
