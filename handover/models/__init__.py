"""Models of the handover app, split by sub-domain (STYLE.md §1 growth rule) and re-exported here.

``base`` must be imported first: ``runs.models`` imports ``TimeStampedModel`` from here, and the
handover models refer to the runs models by name only ("runs.Run"), so there is no import cycle.
"""

from __future__ import annotations

from handover.models.base import TimeStampedModel, UserPreference, validate_time_zone
from handover.models.handovers import (
    Handover,
    HandoverNotification,
    HandoverRevision,
    HandoverRun,
    ResidualException,
)
from handover.models.tokens import ApiTokenLabel, ApiTokenUse

__all__ = [
    "ApiTokenLabel",
    "ApiTokenUse",
    "Handover",
    "HandoverNotification",
    "HandoverRevision",
    "HandoverRun",
    "ResidualException",
    "TimeStampedModel",
    "UserPreference",
    "validate_time_zone",
]
