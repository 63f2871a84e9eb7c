"""Symbolic choices on a CrossHair path: :class:`Chooser` (each decision a balanced tree of
forks), :class:`Rejected` (an input a path could not build) and :class:`Proportional`,
the pathing oracle that gives every option of a decision its share."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class Chooser:
    """Symbolic choices on one CrossHair path: each ``choose(n)`` is a balanced
    tree of forks (fresh booleans in CrossHair's path tree), so the search
    explores every option of every decision without repeating a path."""

    def __init__(self, space: Any) -> None:
        self.space = space
        self.trail: list[tuple[str, int, int]] = []

    def choose(self, n: int, what: str) -> int:
        if n <= 0:
            raise ValueError(f"no option for {what}")
        lo, hi = 0, n
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self.space.smt_fork(desc=what, probability_true=(mid - lo) / (hi - lo)):
                hi = mid
            else:
                lo = mid
        self.trail.append((what, lo, n))
        return lo

    def pick(self, options: Sequence[Any], what: str) -> Any:
        return options[self.choose(len(options), what)]

    def flag(self, what: str) -> bool:
        return self.choose(2, what) == 1


class Rejected(Exception):
    """The input a path chose could not be built (counted: it should never happen)."""


class Proportional:
    """CrossHair pathing oracle that takes each fork with the probability the chooser
    asks for (the share of options on its side), so every option of a decision is
    equally likely until its subtree is exhausted. (CrossHair's default oracle favours
    the false side of a fresh fork 3:1, which starves the low options of a choice.)"""

    def pre_path_hook(self, space: Any) -> None:
        pass

    def post_path_hook(self, path: Any) -> None:
        pass

    def decide(self, root: Any, node: Any, engine_probability: float | None) -> float:
        return 0.5 if engine_probability is None else engine_probability

