"""Every DDS participant this project starts stays on loopback.

A real participant (an rclpy node with a publisher and a subscription) runs in
a subprocess under the environment the tests and scripts export; the test then
reads which local addresses that process's sockets are bound to, from
/proc/<pid>/net, and refuses any that is not 127.0.0.1 or a multicast group
(the loopback-joined discovery group).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

PROBE = textwrap.dedent('''
    import json, os, time
    import rclpy
    from std_msgs.msg import String

    rclpy.init()
    node = rclpy.create_node("loopback_probe")
    pub = node.create_publisher(String, "/loopback_probe", 10)
    sub = node.create_subscription(String, "/loopback_probe", lambda m: None, 10)
    time.sleep(1.5)
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    bound = []
    for proto in ("udp", "udp6", "tcp", "tcp6"):
        with open(f"/proc/self/net/{proto}") as f:
            next(f)
            for line in f:
                fields = line.split()
                if fields[9] in inodes:
                    bound.append([proto, fields[1]])
    print(json.dumps(bound))
    node.destroy_node()
    rclpy.shutdown()
''')


def _ipv4(hex_addr: str) -> str:
    return ".".join(str(int(hex_addr[i:i + 2], 16)) for i in (6, 4, 2, 0))


@pytest.mark.skipif(not os.path.isdir("/proc/self/net"), reason="needs Linux /proc")
def test_a_participant_binds_only_loopback_and_multicast_groups():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, env=os.environ.copy())
    assert out.returncode == 0, out.stderr[-2000:]
    bound = json.loads(out.stdout.strip().splitlines()[-1])
    assert bound, "the probe found no sockets at all: it would prove nothing"
    offenders = []
    for proto, local in bound:
        addr, _port = local.split(":")
        if proto.endswith("6"):
            offenders.append(f"{proto} {local}")  # the profile declares UDPv4 only
            continue
        ip = _ipv4(addr)
        if not (ip == "127.0.0.1" or 224 <= int(ip.split(".")[0]) <= 239):
            offenders.append(f"{proto} {ip}:{int(_port, 16)}")
    assert not offenders, f"sockets outside loopback: {offenders} (all: {bound})"
