"""The handover app's models, gathered for Django's registry (they live in the slices).

``validate_time_zone`` stays importable here: migrations name it as ``handover.models.validate_time_zone``.
"""

from __future__ import annotations

from handover.accounts.models import ApiTokenLabel, ApiTokenUse
from handover.accounts.preference_models import UserPreference
from handover.core.models import validate_time_zone
from handover.handovers.models import (
    Handover,
    HandoverNotification,
    HandoverRevision,
    HandoverRun,
    ResidualException,
)
from handover.notifications.models import (
    AppriseTarget,
    Notification,
    NotificationDelivery,
    NotificationEmail,
    NotificationPreference,
    Team,
)
from handover.ownership.models import AgedWorkEscalation, JobOwnership, TargetOwnership
from handover.problems.models import Problem, ProblemEvent, ProblemHandover

__all__ = [
    "AgedWorkEscalation",
    "JobOwnership",
    "TargetOwnership",
    "ApiTokenLabel",
    "AppriseTarget",
    "Notification",
    "NotificationDelivery",
    "NotificationEmail",
    "NotificationPreference",
    "Team",
    "ApiTokenUse",
    "Handover",
    "HandoverNotification",
    "HandoverRevision",
    "HandoverRun",
    "Problem",
    "ProblemEvent",
    "ProblemHandover",
    "ResidualException",
    "UserPreference",
    "validate_time_zone",
]
