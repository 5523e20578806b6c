"""``python -m robot_harness`` is the robot-harness command."""
import sys

from robot_harness.cli import main

sys.exit(main())
