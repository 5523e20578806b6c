"""Execution: dispatching tool calls to the world and supervising managed actions.

``dispatch.Dispatcher`` is the only caller of ``NavigationPort.send_goal``;
``leases.Leases`` the only writer of lease records for a mission;
``supervise.ActionSupervisor`` tracks an accepted action to its verified end.
"""
