"""Behaviour traits of a simulated user: their bounds, ranges and per-scenario sampling (DESIGN §5).

``Behaviour`` is what one dialogue's user is: a value per trait, recorded in every
transcript (``scenario.behaviour``).  ``BehaviourSpec`` is what a persona file or a run
asks for: each trait either a value or a range to draw from, ``patience = [2, 5]``
(inclusive; ``reveal`` takes a list of modes to choose among).  ``BehaviourSpec.sample``
draws every ranged trait from the scenario seed, one RNG per trait, so the same scenario
always gets the same user and adding a trait never shifts another's draw.

Every bad value is one line naming the trait and its range (``check_trait``): the persona
loader adds the file and field, the CLI the flag.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["Reveal", "Behaviour", "BehaviourSpec", "TRAITS", "check_trait", "describe_trait"]

Reveal = Literal["never", "relevant", "eager"]
REVEAL_MODES: tuple[str, ...] = ("never", "relevant", "eager")


class Behaviour(BaseModel):
    """How a simulated user behaves; recorded in every transcript."""

    model_config = ConfigDict(extra="forbid")

    patience: int = Field(3, ge=0, le=20, description="unhelpful turns tolerated over the whole dialogue (failed "
                          "answers and clarification rounds) before giving up")
    cooperativeness: float = Field(0.8, ge=0, le=1,
                                   description="chance of answering the assistant's clarifying questions")
    language_skill: float = Field(1.0, ge=0, le=1, description="1 = precise and well spelt; low = vague, misspelt")
    verbosity: float = Field(0.5, ge=0, le=1, description="0 = terse, 1 = chatty")
    reveal: Reveal = Field("relevant", description="when persona facts are volunteered")

    @model_validator(mode="before")
    @classmethod
    def _from_spec(cls, data: Any) -> Any:
        """A persona's spec stands for its user when it has no range (``Scenario(behaviour=persona.behaviour)``)."""
        if isinstance(data, BehaviourSpec):
            if data.ranged:
                raise ValueError(f"{', '.join(data.ranged)} given as a range: draw the user first (spec.sample(seed))")
            return data.model_dump()
        return data


def _bounds(name: str) -> tuple[float, float]:
    meta = Behaviour.model_fields[name].metadata
    lo = next(m.ge for m in meta if getattr(m, "ge", None) is not None)
    hi = next(m.le for m in meta if getattr(m, "le", None) is not None)
    return lo, hi


# trait -> "int" | "float" | "choice"; bounds come from Behaviour's own fields (one source).
TRAITS: dict[str, str] = {"patience": "int", "cooperativeness": "float", "language_skill": "float",
                          "verbosity": "float", "reveal": "choice"}


def describe_trait(name: str) -> str:
    """'patience: an integer 0-20, or a range [low, high] within it' (for error lines)."""
    kind = TRAITS[name]
    if kind == "choice":
        modes = ", ".join(REVEAL_MODES)
        return f"{name}: one of {modes}, or a list of them to draw from"
    lo, hi = _bounds(name)
    what = "an integer" if kind == "int" else "a number"
    return f"{name}: {what} {lo:g}-{hi:g}, or a range [low, high] within it"


def _scalar_ok(name: str, value: Any) -> bool:
    kind = TRAITS[name]
    if kind == "choice":
        return isinstance(value, str) and value in REVEAL_MODES
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if kind == "int" and not float(value).is_integer():
        return False
    lo, hi = _bounds(name)
    return lo <= value <= hi


def check_trait(name: str, value: Any) -> Any:
    """``value`` normalised (a range as a list), or ValueError: one line naming the trait and its range."""
    if name not in TRAITS:
        raise ValueError(f"unknown behaviour trait {name!r}; traits: {', '.join(TRAITS)}")
    if isinstance(value, (list, tuple)):
        items = list(value)
        if TRAITS[name] == "choice":
            if not items or not all(_scalar_ok(name, v) for v in items):
                raise ValueError(f"{value!r} is out of range ({describe_trait(name)})")
            return items
        if len(items) != 2 or not all(_scalar_ok(name, v) for v in items):
            raise ValueError(f"{value!r} is out of range ({describe_trait(name)})")
        if items[0] > items[1]:
            raise ValueError(f"range {items!r} is inverted: low must not exceed high ({describe_trait(name)})")
        return [int(v) for v in items] if TRAITS[name] == "int" else [float(v) for v in items]
    if not _scalar_ok(name, value):
        raise ValueError(f"{value!r} is out of range ({describe_trait(name)})")
    return int(value) if TRAITS[name] == "int" else value


class BehaviourSpec(BaseModel):
    """A persona's ``[behaviour]``: each trait a value, or a range drawn per scenario."""

    model_config = ConfigDict(extra="forbid")

    patience: Any = 3
    cooperativeness: Any = 0.8
    language_skill: Any = 1.0
    verbosity: Any = 0.5
    reveal: Any = "relevant"

    @model_validator(mode="before")
    @classmethod
    def _from_behaviour(cls, data: Any) -> Any:
        return data.model_dump() if isinstance(data, Behaviour) else data

    @field_validator("*", mode="before")
    @classmethod
    def _check(cls, value: Any, info: Any) -> Any:
        return check_trait(info.field_name, value)

    @property
    def ranged(self) -> list[str]:
        """The traits given as a range."""
        return [n for n in TRAITS if isinstance(getattr(self, n), list)]

    def with_overrides(self, overrides: Mapping[str, Any]) -> BehaviourSpec:
        """This spec with ``overrides`` (a run's ``--behaviour``) in place of the persona's values."""
        return BehaviourSpec.model_validate({**self.model_dump(), **overrides}) if overrides else self

    def sample(self, seed: int) -> Behaviour:
        """The user of one scenario: every range drawn from ``seed`` (str-seeded: the same in every process)."""
        values: dict[str, Any] = {}
        for name, kind in TRAITS.items():
            v = getattr(self, name)
            if isinstance(v, list):
                rng = random.Random(f"{seed}|behaviour|{name}")
                if kind == "choice":
                    v = rng.choice(v)
                elif kind == "int":
                    v = rng.randint(v[0], v[1])
                else:
                    v = round(rng.uniform(v[0], v[1]), 3)
            values[name] = v
        return Behaviour(**values)
