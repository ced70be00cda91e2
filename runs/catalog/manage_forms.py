"""Forms of the admin pages: grant and revoke roles, issue, rotate and revoke keys, integration security."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth import get_user_model

from runs.catalog.keys import MAX_ROTATION_GRACE_SECONDS
from runs.catalog.models import Integration, Job, Tenant
from runs.catalog.services import JOB_ROLES, TENANT_ROLES

ROLE_CHOICES = [
    ("support", "Support (tenant)"),
    ("business_owner", "Business owner (tenant)"),
    ("auditor", "Auditor (tenant)"),
    ("technical_owner", "Technical owner (job)"),
]
GRACE_CHOICES = [
    (0, "Revoke the old key now"),
    (3600, "Keep the old key working for 1 hour"),
    (86400, "Keep the old key working for 1 day"),
    (MAX_ROTATION_GRACE_SECONDS, "Keep the old key working for 7 days"),
]


class RoleGrantForm(forms.Form):
    """A role for a person: tenant roles need a tenant, the technical owner role needs a job."""

    user = forms.ModelChoiceField(queryset=get_user_model().objects.none(), to_field_name="username", label="Person")
    role = forms.ChoiceField(choices=ROLE_CHOICES)
    tenant = forms.ModelChoiceField(queryset=Tenant.objects.none(), required=False, to_field_name="public_id")
    job = forms.ModelChoiceField(queryset=Job.objects.none(), required=False, to_field_name="public_id")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["user"].queryset = get_user_model().objects.filter(is_active=True).order_by("username")  # type: ignore[attr-defined]
        self.fields["tenant"].queryset = Tenant.objects.order_by("slug_key")  # type: ignore[attr-defined]
        self.fields["job"].queryset = Job.objects.order_by("key")  # type: ignore[attr-defined]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        role = data.get("role")
        if role in TENANT_ROLES and not data.get("tenant"):
            self.add_error("tenant", "Choose the tenant this role is for.")
        if role in JOB_ROLES and not data.get("job"):
            self.add_error("job", "Choose the job this role is for.")
        return data

    def target(self) -> Tenant | Job:
        """The object the role is granted on (after validation)."""
        data = self.cleaned_data
        target: Tenant | Job = data["tenant"] if data["role"] in TENANT_ROLES else data["job"]
        return target


class RoleRevokeForm(forms.Form):
    """Which holding to take back: the person, the role and the object's public id."""

    user = forms.CharField(max_length=150)
    role = forms.ChoiceField(choices=ROLE_CHOICES)
    object_id = forms.UUIDField()

    def target(self) -> Tenant | Job | None:
        """The tenant or job the role is held on (after validation); None when it no longer exists."""
        data = self.cleaned_data
        model = Job if data["role"] in JOB_ROLES else Tenant
        return model.objects.filter(public_id=data["object_id"]).first()


class IntegrationKeyCreateForm(forms.Form):
    """A new key: its integration, a label, and the tenants it may write to (or, explicitly, all)."""

    integration = forms.ModelChoiceField(queryset=Integration.objects.none(), to_field_name="public_id")
    label = forms.CharField(max_length=100, required=False)
    tenants = forms.ModelMultipleChoiceField(queryset=Tenant.objects.none(), required=False, to_field_name="public_id")
    all_tenants = forms.BooleanField(required=False, label="All tenants (an explicit choice)")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["integration"].queryset = Integration.objects.order_by("name")  # type: ignore[attr-defined]
        self.fields["tenants"].queryset = Tenant.objects.order_by("slug_key")  # type: ignore[attr-defined]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if not data.get("tenants") and not data.get("all_tenants"):
            self.add_error("tenants", "Bind the key to at least one tenant, or choose all tenants explicitly.")
        if data.get("tenants") and data.get("all_tenants"):
            self.add_error("all_tenants", "Choose tenants or all tenants, not both.")
        return data


class IntegrationKeyRotateForm(forms.Form):
    """How long the old key keeps working after the new one is issued."""

    grace_seconds = forms.TypedChoiceField(choices=GRACE_CHOICES, coerce=int, initial=0, label="Old key")


class IntegrationSecurityForm(forms.Form):
    """Extra redaction names and optional signature verification of one integration.

    ``based_on``: the values the page showed (``handover.core.edits``), so that a save never puts
    back a value someone else changed meanwhile."""

    based_on = forms.CharField(required=False, widget=forms.HiddenInput)

    redact_names = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="Key names whose values are redacted anywhere in a post, one per line or comma-separated "
        "(e.g. customer_email, api_secret). Never name a field the source's parser reads for job, tenant "
        "or execution: reprocessing re-reads the stored body.",
    )
    signing_secret_env = forms.CharField(
        required=False,
        max_length=100,
        label="Signing secret variable",
        help_text="Empty: posts are not signed. Else the environment variable holding the shared secret, "
        "HANDOVER_SIGNING_SECRET_ and a name of yours (e.g. HANDOVER_SIGNING_SECRET_AIRFLOW); the secret itself "
        "is never stored here.",
    )
    signature_header = forms.CharField(max_length=100, initial="X-Handover-Signature")
    timestamp_header = forms.CharField(max_length=100, initial="X-Handover-Timestamp")
    signature_tolerance_seconds = forms.IntegerField(
        min_value=30, max_value=3600, initial=300, label="Largest timestamp age (s)"
    )
    signature_scheme = forms.ChoiceField(
        choices=[
            ("ts:body", "ts:body — <timestamp>:<body>, timestamp in its own header (Handover's own)"),
            ("ts.body", "ts.body — <timestamp>.<body>, timestamp in its own header"),
            ("body", "body — the raw body alone (GitHub X-Hub-Signature-256 style; no replay protection)"),
            ("t=,v1=", "t=,v1= — one header t=<unix>,v1=<sig> over <t>.<body> (Stripe style)"),
        ],
        initial="ts:body",
        required=False,
        label="What is signed",
    )
    signature_algorithm = forms.ChoiceField(
        choices=[("sha256", "HMAC-SHA256"), ("sha1", "HMAC-SHA1"), ("sha512", "HMAC-SHA512")],
        initial="sha256",
        required=False,
    )
    signature_encoding = forms.ChoiceField(
        choices=[("hex", "hex"), ("base64", "base64")], initial="hex", required=False
    )

    def names(self) -> list[str]:
        """The redaction names entered, split on lines and commas."""
        raw = self.cleaned_data.get("redact_names", "")
        return [part.strip() for line in raw.splitlines() for part in line.split(",") if part.strip()]
