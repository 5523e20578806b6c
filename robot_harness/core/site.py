"""The fleet's shared resources: which a call needs, and where a robot is inside one.

A site resource (``config.site.resources``: an elevator, a door, a corridor, a
dock) is leased across every robot writing one journal database
(``durable.SITE`` scope, one fencing token per acquisition). A skill that names
it needs it while its call runs; a place that names it needs it while the robot
is inside the place: the navigation that goes in takes it, the actions inside
hand it on (presenting its token), and the first one that ends with the robot
outside releases it. Pure: no I/O.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .config import SiteConfig
from .records import Pose2D

__all__ = ["Site"]


@dataclass(frozen=True)
class Site:
    config: SiteConfig = field(default_factory=SiteConfig)
    places: Mapping[str, Pose2D] = field(default_factory=dict)

    @property
    def resources(self) -> tuple[str, ...]:
        return tuple(sorted(self.config.resources))

    def for_skill(self, skill: str) -> tuple[str, ...]:
        """The site resources a call of ``skill`` needs while it runs."""
        return tuple(sorted(n for n, r in self.config.resources.items() if skill in r.skills))

    def inside(self, pose: Pose2D | None) -> tuple[str, ...]:
        """The site resources a robot at ``pose`` is inside a place of (none for an unknown pose)."""
        if pose is None:
            return ()
        return tuple(sorted(n for n, r in self.config.resources.items()
                            if any(p in self.places and _within(pose, self.places[p], r.radius_m) for p in r.places)))

    def for_motion(self, skill: str, start: Pose2D | None, poses: Iterable[Pose2D]) -> tuple[str, ...]:
        """What a physical call needs: its skill's resources, those of the place it starts inside (it
        must hold the place to leave it) and those of every place it passes or ends in."""
        need = set(self.for_skill(skill)) | set(self.inside(start))
        for pose in poses:
            need.update(self.inside(pose))
        return tuple(sorted(need))

    def place_bound(self, resource: str) -> bool:
        """Whether ``resource`` is held while inside a place (else only while a call runs)."""
        res = self.config.resources.get(resource)
        return res is not None and bool(res.places)


def _within(pose: Pose2D, place: Pose2D, radius_m: float) -> bool:
    return math.hypot(pose.x - place.x, pose.y - place.y) <= radius_m
