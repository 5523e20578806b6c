"""The README's "On a robot" section is true: its parameter file means what it says for /robot1's nodes,
every launch argument it names is declared, every `robot-harness up` option it names exists, and the
lifecycle commands it gives are ManageNodes' constants."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import yaml

from robot_harness.params import node_params, rewrite_params

REPO = Path(__file__).resolve().parents[2]
SECTION = (REPO / "README.md").read_text().split("## On a robot", 1)[1].split("\n## ", 1)[0]


def test_the_parameter_file_applies_to_the_namespaced_nodes():
    [block] = re.findall(r"```yaml\n(.*?)```", SECTION, flags=re.S)
    doc = rewrite_params(block, "robot1")
    supervisor = node_params(doc, "supervisor", "/robot1")
    assert supervisor["journal_path"] == "/var/lib/robot_harness/robot1.sqlite3"
    assert supervisor["diagnostic_period_s"] == 1.0  # /** reaches every node
    assert node_params(doc, "snapshot_aggregator", "/robot1")["use_tf"] is True
    assert "journal_path" not in node_params(doc, "supervisor", "")  # nested under /robot1 only
    assert yaml.safe_load(block)  # and it is plain YAML


def test_every_launch_argument_named_is_declared():
    launch = (REPO / "launch" / "harness.launch.py").read_text()
    named = set(re.findall(r"\b([a-z_]+):=", SECTION))
    declared = set(re.findall(r'^    \("([a-z_]+)", "', launch, flags=re.M))  # the ARGUMENTS table
    assert named and named <= declared, named - declared


def test_every_up_option_named_exists():
    out = subprocess.run([sys.executable, "-m", "robot_harness", "up", "--help"], cwd=REPO, capture_output=True,
                         text=True, timeout=60).stdout
    same = SECTION.split("`robot-harness up` takes the same (", 1)[1].split(")", 1)[0]
    named = set(re.findall(r"`(--[a-z-]+)`", same))
    assert {"--namespace", "--params-file"} <= named
    assert all(opt in out for opt in named), [o for o in named if o not in out]


def test_the_lifecycle_commands_are_manage_nodes_constants():
    srv = (REPO / "srv" / "ManageNodes.srv").read_text()
    constants = {name.lower(): int(v) for name, v in re.findall(r"uint8\s+([A-Z]+)\s*=\s*(\d+)", srv)}
    given = {name: int(v) for v, name in re.findall(r"(\d) (startup|pause|resume|reset|shutdown)", SECTION)}
    assert given and all(constants[name] == v for name, v in given.items()), (given, constants)
