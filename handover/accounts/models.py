"""Personal API tokens (django-rest-knox) and what knox keeps no column for: their use and their label."""

from __future__ import annotations

from django.db import models
from django.db.models import Q


class ApiTokenUse(models.Model):
    """The last authenticated request made with one personal API token (``knox.AuthToken``).

    Written by ``handover.accounts.authentication.TokenAuthentication`` at most once a minute per token, and
    deleted with the token (revoked, expired or logged out).
    """

    token = models.OneToOneField("knox.AuthToken", primary_key=True, on_delete=models.CASCADE, related_name="use")
    last_used_at = models.DateTimeField(help_text="UTC; accurate to a minute (written at most once a minute)")

    class Meta:
        verbose_name = "API token use"

    def __str__(self) -> str:
        return f"{self.token_id[:8]}… last used {self.last_used_at:%Y-%m-%d %H:%M}"


class ApiTokenLabel(models.Model):
    """What a personal API token is for, in its owner's words ("nightly export check").

    Written once, by ``handover.accounts.services.api_token_create``; deleted with the token. A token
    made another way (knox's own views, the shell) has none.
    """

    token = models.OneToOneField(
        "knox.AuthToken", primary_key=True, on_delete=models.CASCADE, related_name="token_label"
    )
    label = models.CharField(max_length=100, help_text="what the token is for, chosen by its owner")

    class Meta:
        verbose_name = "API token label"
        constraints = [
            models.CheckConstraint(
                condition=~Q(label=""), name="handover_apitokenlabel_label_set", violation_error_code="required"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.token_id[:8]}…: {self.label}"
