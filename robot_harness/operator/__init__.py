"""Operator surfaces: the MCP server, the live dashboard and the Foxglove bridge.

None of them holds authority of its own. Every tool call they make goes
through the supervisor's recorded dispatcher (journal, fresh-state
preconditions, leases, approvals), and none of them can declare a mission
complete: only the independent verifier does that.
"""

import ipaddress

__all__ = ["is_loopback"]


def is_loopback(host: str) -> bool:
    """Is ``host`` (a bind address or a Host name, brackets allowed) this machine's loopback?"""
    name = host.strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False
