"""The benches' choice of eval scenarios (bench/plan_gate.py, bench/routing.py): scenarios/eval, optionally only
some families and at most N per family. Stdlib only."""
from __future__ import annotations

from pathlib import Path

__all__ = ["eval_paths"]


def eval_paths(repo: Path, families: list[str] | None = None, limit: int = 0) -> list[Path]:
    """scenarios/eval's files in name order; a family is a name's part before its first ``-``."""
    paths = sorted((repo / "scenarios" / "eval").glob("*.yaml"))
    if families:
        paths = [p for p in paths if p.stem.split("-")[0] in families]
    if limit:
        seen: dict[str, int] = {}
        kept = []
        for p in paths:
            family = p.stem.split("-")[0]
            seen[family] = seen.get(family, 0) + 1
            if seen[family] <= limit:
                kept.append(p)
        paths = kept
    return paths
