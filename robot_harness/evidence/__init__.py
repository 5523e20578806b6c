"""Mission evidence: rosbag2-compatible MCAP bags, message definitions, artifact checks.

ROS-free like :mod:`robot_harness.core`: nothing here imports rclpy or
generated messages (the recorder that feeds a store from the live graph is
:mod:`robot_harness.nodes.recorder`).
"""
from .bag import (
    LIBRARY,
    ROSBAG2_METADATA_VERSION,
    BagFinalisation,
    BagFormatError,
    BagMessage,
    BagState,
    BagSummary,
    EvidenceError,
    EvidenceMismatch,
    EvidenceNotFound,
    EvidenceStore,
    EvidenceStoreMisuse,
    McapEvidenceStore,
    MemoryEvidenceStore,
    MessageDefinitionNotFound,
    MessageDefinitions,
    TopicSummary,
    bag_state,
    normalize_type_name,
    qos_profiles_yaml,
    read_bag_messages,
    read_bag_metadata,
    verify_artifact,
)

__all__ = [
    "LIBRARY",
    "ROSBAG2_METADATA_VERSION",
    "BagFinalisation",
    "BagFormatError",
    "BagMessage",
    "BagState",
    "BagSummary",
    "EvidenceError",
    "EvidenceMismatch",
    "EvidenceNotFound",
    "EvidenceStore",
    "EvidenceStoreMisuse",
    "McapEvidenceStore",
    "MemoryEvidenceStore",
    "MessageDefinitionNotFound",
    "MessageDefinitions",
    "TopicSummary",
    "bag_state",
    "normalize_type_name",
    "qos_profiles_yaml",
    "read_bag_messages",
    "read_bag_metadata",
    "verify_artifact",
]
