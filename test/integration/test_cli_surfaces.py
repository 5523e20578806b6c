"""The operator-surface commands as a user runs them: `up --mcp --dashboard`, `dashboard`, `foxglove`."""
from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import time
import urllib.request

import pytest

from .test_cli import CLI, REPO, cli, interrupt

pytest.importorskip("rclpy")


def _env() -> dict[str, str]:
    """No tokens: the loopback defaults as a fresh shell has them."""
    env = os.environ.copy()
    for name in ("ROBOT_HARNESS_MCP_TOKEN", "ROBOT_HARNESS_OPERATOR_TOKEN"):
        env.pop(name, None)
    return env


def test_up_with_mcp_and_dashboard_serves_both_and_stops_cleanly(tmp_path):
    journal = tmp_path / "up.sqlite3"
    up = subprocess.Popen([*CLI, "up", "--journal", str(journal), "--mcp", "--mcp-port", "0",
                           "--dashboard", "--dashboard-port", "0"],
                          cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=_env())
    try:
        seen = ""
        deadline = time.monotonic() + 60
        while "dashboard at" not in seen and time.monotonic() < deadline and up.poll() is None:
            seen += up.stdout.readline()
        mcp_url = re.search(r"MCP server at (http://127\.0\.0\.1:\d+/mcp)", seen)
        dash_url = re.search(r"dashboard at (http://127\.0\.0\.1:\d+/)", seen)
        assert mcp_url and dash_url, seen[-3000:]
        with urllib.request.urlopen(dash_url.group(1) + "api/health", timeout=10) as resp:
            health = json.loads(resp.read())
        assert health["ok"] and health["journal"] == str(journal) and health["writes"]

        async def pose() -> dict:
            import mcp

            async with mcp.Client(mcp_url.group(1)) as client:
                return (await client.call_tool("get_pose", {})).structured_content
        answer = asyncio.run(asyncio.wait_for(pose(), 60))
        assert answer["status"] == "ok" and answer["mission_id"].startswith("mcp-session-"), answer
    finally:
        interrupt(up)
    assert up.returncode == 0
    missions = json.loads(cli("journal", "show", "--journal", str(journal), "--mission", "list", "--json").stdout)
    session = [m for m in missions if m["mission_id"].startswith("mcp-session-")]
    assert session and session[0]["status"] == "CANCELLED", missions


def test_dashboard_off_loopback_without_a_token_is_a_usage_error(tmp_path):
    proc = subprocess.run([*CLI, "dashboard", "--read-only", "--journal", str(tmp_path / "j.sqlite3"),
                           "--host", "0.0.0.0", "--port", "0"],
                          cwd=REPO, capture_output=True, text=True, timeout=60, env=_env())
    assert proc.returncode == 2, proc.stderr
    assert "token" in proc.stderr and "Traceback" not in proc.stderr


def test_foxglove_prints_the_shipped_layout():
    proc = cli("foxglove", "--print-layout")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == json.loads((REPO / "config" / "foxglove_layout.json").read_text())
