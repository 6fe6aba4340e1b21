"""Capped exponential backoff with jitter, the same rule as the server's own clients use.

Attempt n waits between half and all of min(max, initial × 2ⁿ), at random, so that many
clients cut off at once do not all come back at the same instant.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Backoff:
    """Delays in seconds: the first ceiling (``initial``) and the largest one (``maximum``)."""

    initial: float = 0.25
    maximum: float = 10.0

    def delay(self, attempt: int) -> float:
        """Seconds to wait before retry number ``attempt`` (0 for the first retry)."""
        ceiling = min(self.maximum, self.initial * 2 ** min(max(attempt, 0), 30))
        return ceiling / 2 + random.random() * ceiling / 2
