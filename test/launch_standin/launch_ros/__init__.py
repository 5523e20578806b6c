"""Stand-in for ros2/launch_ros 0.28.x (Kilted): Node and PushRosNamespace, own code."""
from . import actions  # noqa: F401
