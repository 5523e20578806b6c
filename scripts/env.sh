# source scripts/env.sh — a shell with the venv, the colcon install space and
# the loopback-only DDS profile, where `robot-harness` and `ros2 run`-style
# executables work. Run `make setup` (or scripts/setup.sh) first.
# shellcheck source=/dev/null
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/_ros_env.sh"
# A private DDS domain per shell unless one was chosen.
if [ -z "${ROS_DOMAIN_ID:-}" ]; then
  export ROS_DOMAIN_ID=$(( (RANDOM % 100) + 1 ))
fi
