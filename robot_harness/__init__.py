"""robot_harness: an evidence-gated, closed-loop agent harness for ROS 2 robots.

The import package is split across two directories at run time: the sources
(this directory) and the interfaces rosidl generates into the colcon install
space (``robot_harness.msg``, ``.srv``, ``.action``). ``extend_path`` lets both
halves resolve whichever directory comes first on ``sys.path``.
"""
from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)

__version__ = "0.1.0"
