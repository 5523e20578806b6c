"""Capability cards and routing (issue 18, RegenHarness §4.3): which provider acts for a call.

A capability class (navigation, camera, speech, messaging) may have several providers, each with a card in
the site's config (``HarnessConfig.providers``: expected success, risk, latency, cost, health, declared
preconditions and effects). For each physical or capability call the router scores the enabled providers of
the skill's capability,

    s = w_p·p̂ - w_r·r̂ - w_u·û - w_l·l̂ - w_c·ĉ - w_h·ĥ

with p̂ the card's success probability refined by remembered *verified* outcomes (a Beta mean with the card's
``p_success`` as ``prior_strength`` pseudo-outcomes), û that estimate's standard error, r̂ the card's risk,
l̂ and ĉ the latency and cost as fractions of the largest among the candidates, and ĥ = 1 - health. The
best score wins; ties go to the first name in sorted order (never to the order the cards are listed in,
which a journaled configuration does not keep). A provider that failed the call's obligation in this
mission is excluded for it (the fallback), so a retry keeps the obligation and changes only who acts.

Pure and deterministic: outcomes come in as counts (core/memory.provider_stats, plus this mission's); the
decision, with every candidate's terms and score, is journaled by the dispatcher with the action's intent.
The verifier never reads it: evidence decides, whichever provider acted.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from .config import ProviderCard, RoutingConfig
from .errors import BackendUnavailable, UsageError
from .ports import BackendEvent, GoalAck, NavigationPort
from .records import Pose2D

__all__ = ["SKILL_CAPABILITY", "capability_of", "navigation_providers", "Candidate", "RoutingDecision", "route", "ProviderNavigation",
           "RoutedNavigation", "Outcomes"]

SKILL_CAPABILITY: Mapping[str, str] = {"capture_image": "camera", "speak": "speech", "send_message": "messaging"}
"""The capability of each capability skill; every managed (Nav2) skill is ``navigation``."""

Outcomes = Mapping[str, tuple[int, int]]
"""provider -> (verified successes, attempts with a known outcome)."""


def navigation_providers(providers: Mapping[str, ProviderCard]) -> dict[str, str]:
    """Navigation card name -> its action namespace, when there are two or more, or one under a namespace
    of its own (then the robot is driven through that stack alone); else empty (one card for the robot's
    own Nav2 is no choice: it is driven as it is, unrouted). The one rule the composition roots (the
    supervisor's Nav2 ports, the in-process simulator's) build their navigation by."""
    cards = {name: card.namespace.strip("/") for name, card in providers.items() if card.capability == "navigation"}
    return cards if len(cards) >= 2 or any(cards.values()) else {}


def capability_of(skill_name: str, *, managed: bool) -> str | None:
    return "navigation" if managed else SKILL_CAPABILITY.get(skill_name)


@dataclass(frozen=True)
class Candidate:
    provider: str
    score: float
    terms: Mapping[str, float]
    """p̂, r̂, û, l̂, ĉ, ĥ and the outcomes they came from."""
    excluded: str = ""
    """Why it may not act for this call ("" when it may)."""

    def as_dict(self) -> dict[str, Any]:
        return {"provider": self.provider, "score": round(self.score, 4),
                "terms": {k: round(v, 4) for k, v in self.terms.items()}, **({"excluded": self.excluded}
                                                                            if self.excluded else {})}


@dataclass(frozen=True)
class RoutingDecision:
    capability: str
    chosen: str | None
    candidates: tuple[Candidate, ...]
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return {"capability": self.capability, "chosen": self.chosen, "reason": self.reason,
                "candidates": [c.as_dict() for c in self.candidates]}


def route(capability: str, cards: Mapping[str, ProviderCard], config: RoutingConfig, *,
          outcomes: Outcomes = {}, excluded: Mapping[str, str] = {}) -> RoutingDecision:
    """Score every enabled provider of ``capability``; ``excluded``: provider -> why it may not act now."""
    # by name: a journaled config comes back with its keys sorted (a decision replay), so nothing may hang
    # on the order the site listed its cards in
    mine = sorted((name, card) for name, card in cards.items() if card.capability == capability and card.enabled)
    if not mine:
        return RoutingDecision(capability=capability, chosen=None, candidates=(),
                               reason=f"no provider of {capability} is configured")
    w, k = config.weights, config.prior_strength
    top_latency = max(c.latency_s for _, c in mine) or 1.0
    top_cost = max(c.cost for _, c in mine) or 1.0
    scored: list[Candidate] = []
    for name, card in mine:
        wins, tries = outcomes.get(name, (0, 0))
        wins, tries = max(0, min(wins, tries)), max(0, tries)
        p = (k * card.p_success + wins) / (k + tries)
        u = math.sqrt(p * (1.0 - p) / (k + tries + 1.0))
        terms = {"p": p, "r": card.risk, "u": u, "l": card.latency_s / top_latency, "c": card.cost / top_cost,
                 "h": 1.0 - card.health, "wins": float(wins), "tries": float(tries)}
        s = w.p * p - w.r * card.risk - w.u * u - w.l * terms["l"] - w.c * terms["c"] - w.h * terms["h"]
        scored.append(Candidate(provider=name, score=s, terms=terms, excluded=excluded.get(name, "")))
    open_ = [c for c in scored if not c.excluded]
    if not open_:
        return RoutingDecision(capability=capability, chosen=None, candidates=tuple(scored),
                               reason=f"every provider of {capability} is excluded for this call")
    best = max(open_, key=lambda c: c.score)  # max keeps the first of equals: the first name
    why = f"{best.provider} scores {best.score:.3f}"
    if len(open_) > 1:
        second = max((c for c in open_ if c is not best), key=lambda c: c.score)
        why += f", ahead of {second.provider} ({second.score:.3f})"
    if len(open_) < len(scored):
        why += "; excluded: " + ", ".join(f"{c.provider} ({c.excluded})" for c in scored if c.excluded)
    return RoutingDecision(capability=capability, chosen=best.provider, candidates=tuple(scored), reason=why)


@runtime_checkable
class ProviderNavigation(Protocol):
    """A NavigationPort that can send through one of several navigation providers."""

    providers: tuple[str, ...]

    def use(self, provider: str) -> None:
        """The provider the next ``send_goal`` goes through (an unknown name raises UsageError)."""


@dataclass(eq=False)
class RoutedNavigation:
    """Several NavigationPorts (one per navigation provider, e.g. one Nav2 per action namespace) as one:
    ``send_goal`` goes through the provider chosen by ``use`` (else the first), and every later question
    about that goal (``lookup``, ``cancel``, ``adopt``) to the provider it went through; ``poll`` gathers
    the events of all of them."""

    ports: Mapping[str, NavigationPort]
    _next: str = ""
    _owner: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.ports:
            raise UsageError("a routed navigation needs at least one provider")
        self.providers = tuple(self.ports)

    @property
    def name(self) -> str:
        return "routed:" + ",".join(f"{p}={getattr(port, 'name', p)}" for p, port in self.ports.items())

    def use(self, provider: str) -> None:
        if provider not in self.ports:
            raise UsageError(f"no navigation provider {provider!r} (providers: {', '.join(self.ports)})")
        self._next = provider

    def send_goal(self, *, target: Pose2D, frame_id: str, timeout_s: float, goal_id: str = "",
                  goal: Any = None) -> GoalAck:
        provider, self._next = self._next or self.providers[0], ""
        ack = self.ports[provider].send_goal(target=target, frame_id=frame_id, timeout_s=timeout_s,
                                             goal_id=goal_id, goal=goal)
        if ack.goal_id or goal_id:
            self._owner[ack.goal_id or goal_id] = provider
        return ack

    def _of(self, goal_id: str) -> Iterable[NavigationPort]:
        mine = self._owner.get(goal_id)
        return [self.ports[mine]] if mine is not None else list(self.ports.values())

    def lookup(self, goal_id: str, *, timeout_s: float) -> str | None:
        unreachable: list[str] = []
        ports = list(self._of(goal_id))
        for port in ports:
            try:
                status = port.lookup(goal_id, timeout_s=timeout_s / len(ports))
            except BackendUnavailable as exc:
                unreachable.append(str(exc))
                continue
            if status is not None:
                return status
        if unreachable and len(unreachable) == len(ports):
            raise BackendUnavailable("; ".join(unreachable))
        return None

    def adopt(self, goal_id: str) -> None:
        for port in self._of(goal_id):
            port.adopt(goal_id)

    def cancel(self, goal_id: str, *, timeout_s: float) -> bool:
        return any([port.cancel(goal_id, timeout_s=timeout_s) for port in self._of(goal_id)])

    def poll(self, timeout_s: float) -> list[BackendEvent]:
        """What every provider has now; when none has anything, wait on each in turn for its share of
        ``timeout_s`` (the whole wait stays within it), and return at the first events."""
        ports = list(self.ports.values())
        out: list[BackendEvent] = []
        for port in ports:
            out.extend(port.poll(0.0))
        if out or timeout_s <= 0:
            return out
        for port in ports:
            out.extend(port.poll(timeout_s / len(ports)))
            if out:
                break
        return out
