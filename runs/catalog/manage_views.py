"""Admin pages (staff only, under /manage/): people's roles on tenants and jobs, integration keys, an
integration's security settings."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.admin.views.decorators import staff_member_required
from django.contrib.auth import get_user_model
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from handover.core.edits import BASE_FIELD, EditedMeanwhile, edit_base_field, edit_base_read
from handover.core.errors import DomainError
from handover.core.once import submission_once
from handover.core.one_time import one_time_pop, one_time_stash
from runs.catalog.keys import (
    SECURITY_LABELS,
    integration_key_rotate,
    integration_security,
    integration_security_update,
    security_values,
    signing_secret,
)
from runs.catalog.manage_forms import (
    IntegrationKeyCreateForm,
    IntegrationKeyRotateForm,
    IntegrationSecurityForm,
    RoleGrantForm,
    RoleRevokeForm,
)
from runs.catalog.manage_selectors import integration_key_list, integration_list_all, role_holding_list
from runs.catalog.models import Integration, IntegrationKey
from runs.catalog.services import IssuedKey, integration_key_create, integration_key_revoke, role_grant, role_revoke

# --- roles --------------------------------------------------------------------------------------


@staff_member_required
def role_list_view(request: HttpRequest) -> HttpResponse:
    """Who holds which role on which tenant or job, with revoke buttons and the grant form."""
    return render(
        request,
        "runs/catalog/manage_roles.html",
        {"holdings": role_holding_list(), "grant_form": RoleGrantForm()},
    )


@staff_member_required
@require_POST
def role_grant_view(request: HttpRequest) -> HttpResponse:
    """Grant a role (audited); errors come back as messages on the roles page."""
    form = RoleGrantForm(request.POST)
    if not form.is_valid():
        for field, errors in form.errors.items():
            messages.error(request, f"{field}: {' '.join(str(e) for e in errors)}")
        return redirect("manage:role-list")
    user, role, target = form.cleaned_data["user"], form.cleaned_data["role"], form.target()
    try:
        role_grant(user=user, role=role, obj=target, actor=request.user)  # type: ignore[arg-type]
    except DomainError as exc:
        messages.error(request, exc.detail)
    else:
        messages.success(request, f"{user.get_username()} is now {role.replace('_', ' ')} on {target}.")
    return redirect("manage:role-list")


@staff_member_required
@require_POST
def role_revoke_view(request: HttpRequest) -> HttpResponse:
    """Take a role back (audited)."""
    form = RoleRevokeForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose a role to revoke.")
        return redirect("manage:role-list")
    data = form.cleaned_data
    user = get_object_or_404(get_user_model(), username=data["user"])
    target = form.target()
    if target is None:
        messages.error(request, "That tenant or job no longer exists.")
        return redirect("manage:role-list")
    role_revoke(user=user, role=data["role"], obj=target, actor=request.user)  # type: ignore[arg-type]
    messages.success(request, f"{user.get_username()} is no longer {data['role'].replace('_', ' ')} on {target}.")
    return redirect("manage:role-list")


# --- integration keys -------------------------------------------------------------------------------


ISSUED_SCOPE = "manage-integration-key"


def _key_issued_redirect(request: HttpRequest, issued: IssuedKey) -> HttpResponse:
    """POST -> redirect -> GET: stash the new secret once; the keys page shows it on the next GET only."""
    nonce = one_time_stash(
        request, scope=ISSUED_SCOPE, payload={"key": str(issued.record.public_id), "secret": issued.key}
    )
    return redirect(f"{reverse('manage:key-list')}?issued={nonce}")


def _key_issued_pop(request: HttpRequest) -> IssuedKey | None:
    """The key this person just issued or rotated, once (from the ``issued`` nonce); None after that."""
    nonce = request.GET.get("issued", "")
    value = one_time_pop(request, scope=ISSUED_SCOPE, nonce=nonce)
    if value is None:
        if nonce:  # a reload, going back, or a link someone else was given
            messages.info(request, "A key's secret is shown only once, right after it is issued.")
        return None
    record = IntegrationKey.objects.select_related("integration").filter(public_id=value["key"]).first()
    return IssuedKey(record=record, key=value["secret"]) if record is not None else None


def _key_page(
    request: HttpRequest,
    *,
    issued: IssuedKey | None = None,
    form: IntegrationKeyCreateForm | None = None,
    status: int = 200,
) -> HttpResponse:
    response = render(
        request,
        "runs/catalog/manage_keys.html",
        {
            "keys": integration_key_list(),
            "integrations": integration_list_all(),
            "create_form": form or IntegrationKeyCreateForm(),
            "rotate_form": IntegrationKeyRotateForm(),
            "issued": issued,
        },
        status=status,
    )
    if issued is not None:
        response["Cache-Control"] = "no-store"
    return response


@staff_member_required
@never_cache
def key_list_view(request: HttpRequest) -> HttpResponse:
    """Every integration key: prefix, integration, tenant binding, created, last used, revoked.

    Right after a create or a rotate (``?issued=<nonce>``), the new secret too, this once.
    """
    return _key_page(request, issued=_key_issued_pop(request))


@staff_member_required
@never_cache
@require_POST
def key_create_view(request: HttpRequest) -> HttpResponse:
    """Issue a key (audited), then redirect to the keys page, which shows its secret once."""
    form = IntegrationKeyCreateForm(request.POST)
    if not form.is_valid():
        return _key_page(request, form=form, status=400)
    data = form.cleaned_data
    try:
        with submission_once(request) as sent:  # a double click issues one key, and shows it
            if sent.earlier is not None:
                messages.info(request, sent.notice)
                return redirect(sent.earlier or reverse("manage:key-list"))
            issued = integration_key_create(
                integration=data["integration"],
                tenants=list(data["tenants"]),
                all_tenants=data["all_tenants"],
                created_by=request.user,  # type: ignore[arg-type]
                label=data["label"],
            )
            response = _key_issued_redirect(request, issued)
            sent.record(response["Location"])
    except DomainError as exc:
        messages.error(request, exc.detail)
        return _key_page(request, form=form, status=400)
    return response


@staff_member_required
@never_cache
@require_POST
def key_rotate_view(request: HttpRequest, id: str) -> HttpResponse:
    """Replace a key by a new one with the same binding (audited), then redirect; the new secret is shown once."""
    key = get_object_or_404(IntegrationKey, public_id=id)
    form = IntegrationKeyRotateForm(request.POST)
    grace = form.cleaned_data["grace_seconds"] if form.is_valid() else 0
    try:
        with submission_once(request) as sent:  # a double click rotates once, and shows the new key
            if sent.earlier is not None:
                messages.info(request, sent.notice)
                return redirect(sent.earlier or reverse("manage:key-list"))
            issued = integration_key_rotate(key=key, actor=request.user, grace_seconds=grace)  # type: ignore[arg-type]
            response = _key_issued_redirect(request, issued)
            sent.record(response["Location"])
    except DomainError as exc:
        messages.error(request, exc.detail)
        return redirect("manage:key-list")
    return response


@staff_member_required
@require_POST
def key_revoke_view(request: HttpRequest, id: str) -> HttpResponse:
    """Revoke a key now (audited); later posts with it get 401."""
    key = get_object_or_404(IntegrationKey, public_id=id)
    key = integration_key_revoke(key=key, actor=request.user)  # type: ignore[arg-type]
    messages.success(request, f"Key {key.prefix}… revoked.")
    return redirect("manage:key-list")


# --- integration security -----------------------------------------------------------------------


@staff_member_required
def integration_security_view(request: HttpRequest, id: str) -> HttpResponse:
    """An integration's extra redaction names and optional signature verification (audited)."""
    integration = get_object_or_404(Integration, public_id=id)
    security = integration_security(integration=integration)
    initial = {
        "redact_names": "\n".join(security.redact_names),
        "signing_secret_env": security.signing_secret_env,
        "signature_header": security.signature_header,
        "timestamp_header": security.timestamp_header,
        "signature_tolerance_seconds": security.signature_tolerance_seconds,
        "signature_scheme": security.signature_scheme,
        "signature_algorithm": security.signature_algorithm,
        "signature_encoding": security.signature_encoding,
        BASE_FIELD: edit_base_field(security_values(security)),
    }
    form = IntegrationSecurityForm(request.POST if request.method == "POST" else None, initial=initial)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            integration_security_update(
                integration=integration,
                actor=request.user,  # type: ignore[arg-type]
                redact_names=form.names(),
                signing_secret_env=data["signing_secret_env"],
                signature_header=data["signature_header"],
                timestamp_header=data["timestamp_header"],
                signature_tolerance_seconds=data["signature_tolerance_seconds"],
                # left out of the form: the product's own scheme
                signature_scheme=data["signature_scheme"] or "ts:body",
                signature_algorithm=data["signature_algorithm"] or "sha256",
                signature_encoding=data["signature_encoding"] or "hex",
                based_on=edit_base_read(request.POST, SECURITY_LABELS),
            )
        except DomainError as exc:
            if isinstance(exc, EditedMeanwhile):
                form.add_error(None, exc.detail)
            for field, errors in exc.errors.items():
                form.add_error(field if field in form.fields else None, errors)
        else:
            messages.success(request, f"Security settings of {integration.name} saved.")
            return redirect("manage:integration-security", id=integration.public_id)
    secret_present = bool(signing_secret(security.signing_secret_env))
    return render(
        request,
        "runs/catalog/manage_integration_security.html",
        {"integration": integration, "form": form, "security": security, "secret_present": secret_present},
        status=400 if request.method == "POST" else 200,
    )
