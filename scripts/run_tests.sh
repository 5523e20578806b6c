#!/usr/bin/env bash
# Run pytest; a run that collects or executes no test is a failure, never a pass.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
: "${FASTDDS_DEFAULT_PROFILES_FILE:?source scripts/env.sh first (loopback-only DDS profile)}"
# test/conftest.py picks a fresh random ROS_DOMAIN_ID for every run.
log=$(mktemp)
python -m pytest -p no:cacheprovider "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
if [ "$rc" -eq 5 ]; then
  echo "[test] FAILED: pytest collected no tests (exit 5)"; rm -f "$log"; exit 1
fi
if [ "$rc" -eq 0 ] && ! grep -Eq '[0-9]+ passed' "$log"; then
  echo "[test] FAILED: no test passed"; rm -f "$log"; exit 1
fi
rm -f "$log"
exit "$rc"
