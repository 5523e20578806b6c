# source scripts/env.sh — a shell with the venv, the colcon install space and
# the loopback-only DDS profile, where `robot-harness` and `ros2 run`-style
# executables work. Run `make setup` (or scripts/setup.sh) first.
# shellcheck source=/dev/null
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/_ros_env.sh"
# A private DDS domain per shell unless one was chosen: any of 0-232, the whole range whose ports
# Fast DDS can open (tests, benchmarks and the crash test claim theirs: robot_harness/domains.py).
if [ -z "${ROS_DOMAIN_ID:-}" ]; then
  export ROS_DOMAIN_ID=$(( RANDOM % 233 ))
fi
