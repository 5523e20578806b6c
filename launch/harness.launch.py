"""Bring up the robot_harness node graph, one process per node.

    ros2 launch robot_harness harness.launch.py                 # on a Nav2 robot
    ros2 launch robot_harness harness.launch.py use_sim:=true   # with the simulated robot

Parameters come from config/*.yaml in the package share (the same files the
in-process bring-up, robot_harness.bringup, uses). Lifecycle nodes configure
and activate themselves (autostart), like Nav2's lifecycle manager would.
"""
import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


def generate_launch_description():
    config = os.path.join(get_package_share_directory("robot_harness"), "config")
    use_sim = LaunchConfiguration("use_sim")
    harness_config = LaunchConfiguration("harness_config")
    return LaunchDescription([
        DeclareLaunchArgument("use_sim", default_value="false", description="start the simulated robot"),
        DeclareLaunchArgument("harness_config", default_value=os.path.join(config, "harness.yaml"),
                              description="harness configuration YAML (places, tolerances, limits)"),
        Node(
            package="robot_harness",
            executable="sim_robot",
            output="screen",
            parameters=[os.path.join(config, "sim_robot.yaml")],
            condition=IfCondition(use_sim),
        ),
        Node(
            package="robot_harness",
            executable="snapshot_aggregator",
            name="snapshot_aggregator",
            output="screen",
            parameters=[os.path.join(config, "snapshot_aggregator.yaml"), {"autostart": True}],
        ),
        Node(
            package="robot_harness",
            executable="planner",
            name="planner",
            output="screen",
            parameters=[os.path.join(config, "planner.yaml"), {"autostart": True}],
        ),
        Node(
            package="robot_harness",
            executable="verifier",
            name="verifier",
            output="screen",
            parameters=[os.path.join(config, "verifier.yaml"), {"autostart": True}],
        ),
        Node(
            package="robot_harness",
            executable="recovery",
            name="recovery",
            output="screen",
            parameters=[os.path.join(config, "recovery.yaml"), {"autostart": True}],
        ),
        Node(
            package="robot_harness",
            executable="supervisor",
            name="supervisor",
            output="screen",
            parameters=[os.path.join(config, "supervisor.yaml"),
                        {"autostart": True, "harness_config_file": harness_config}],
        ),
    ])
