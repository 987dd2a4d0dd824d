"""One unseen case of the doctor (`doctor_unseen`, `doctor_unseen_fresh`): its own module, so that
both sets import it without importing each other."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Unseen:
    """One case: the report it is modelled on, the entry it needs, and the `diagnose` keywords."""

    report: str
    expected: str | None  # None: the model exports and runs clean on 2.14.1
    call: Callable[[], dict]
    # The verdict while the doctor gets the case wrong, then why ("wrong page: names X for Y"); the
    # test expects exactly that verdict, so a change either way shows.
    missed: str = ""
