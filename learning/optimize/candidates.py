"""The programs `decomp optimize` tries: which demonstrations each target handler gets.

* `zero-shot`: the program as it is (its own examples only);
* `labelled`: up to `max_demos` demonstrations built from gold answers, for the main handler
  when it is a Q:/A: prompt (no other handler has gold to show);
* `bootstrapped`: each handler's first `max_demos` harvested demonstrations, in training order;
* `random-1` ... `random-N`: per handler, a seeded draw of 1 to `max_demos` harvested
  demonstrations in a drawn order.

No candidate gives a handler more than `max_demos` demonstrations. A candidate that adds the
same demonstrations in the same order as an earlier one is left out.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

from decomp.learning.optimize.harvest import Demo


@dataclass(frozen=True)
class Candidate:
    """One program to score: the demonstrations added to each handler, in order."""

    name: str
    demos: dict[str, tuple[Demo, ...]] = field(default_factory=dict)

    @property
    def identity(self) -> tuple:
        return tuple(sorted((name, tuple(d.text for d in demos)) for name, demos in self.demos.items() if demos))

    @property
    def size(self) -> int:
        return sum(len(demos) for demos in self.demos.values())

    def counts(self) -> dict[str, int]:
        return {name: len(demos) for name, demos in sorted(self.demos.items()) if demos}


def make_candidates(pool: dict[str, list[Demo]], labelled: dict[str, list[Demo]], *, random_candidates: int,
                    max_demos: int, seed: int) -> list[Candidate]:
    """The candidates in the order they are scored (see the module's docstring)."""
    rng = random.Random(seed)
    found = [Candidate("zero-shot")]
    if any(labelled.values()):
        found.append(Candidate("labelled", {name: tuple(rng.sample(demos, min(max_demos, len(demos))))
                                            for name, demos in labelled.items()}))
    if any(pool.values()):
        found.append(Candidate("bootstrapped", {name: tuple(demos[:max_demos]) for name, demos in pool.items()}))
        for number in range(1, random_candidates + 1):
            draw = {name: tuple(rng.sample(demos, rng.randint(1, min(max_demos, len(demos)))))
                    for name, demos in pool.items() if demos}
            found.append(Candidate(f"random-{number}", draw))
    unique: list[Candidate] = []
    seen: set[tuple] = set()
    for candidate in found:
        if candidate.identity not in seen:
            seen.add(candidate.identity)
            unique.append(candidate)
    return unique
