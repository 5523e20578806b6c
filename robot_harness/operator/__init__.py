"""Operator surfaces: the MCP server, the live dashboard and the Foxglove bridge.

None of them holds authority of its own. Every tool call they make goes
through the supervisor's recorded dispatcher (journal, fresh-state
preconditions, leases, approvals), and none of them can declare a mission
complete: only the independent verifier does that.
"""
