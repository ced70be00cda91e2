"""Integrations (admins): list and detail, keys issued once, and custom integrations' mapping editor,
export and reprocess."""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.admin.views.decorators import staff_member_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.text import slugify
from django.views.decorators.http import require_http_methods, require_POST

from handover.core.edits import BASE_FIELD, EditedMeanwhile, edit_base_field, edit_base_read
from handover.core.errors import DomainError
from handover.core.once import submission_once
from handover.core.one_time import one_time_pop, one_time_stash
from handover.core.people import person_or_none, signed_in
from handover.core.views import is_htmx
from runs.alerts.mapping import (
    MappingInvalid,
    Sample,
    integration_custom_create_with_key,
    integration_custom_update,
    integration_mapping,
    integration_mapping_export,
    integration_reprocess_unmatched,
    mapping_from_json,
    mapping_preview,
    samples_from_deliveries,
)
from runs.alerts.models import Delivery
from runs.alerts.parsers.base import storable_data
from runs.alerts.parsers.custom.catalogue.entries import catalogue_entries, catalogue_entry
from runs.alerts.parsers.custom.expressions import FUNCTION_NAMES
from runs.alerts.parsers.custom.parser import SOURCE
from runs.alerts.parsers.custom.vocabulary import (
    FIELD_HELP,
    REQUIRED,
    SCHEDULED_FOR_RULES,
    SIGNALS,
    STARTER_MAPPING,
    STATUSES,
    TIME_FORMATS,
    TRIGGERS,
    WINDOW_RULES,
)
from runs.alerts.parsers.registry import available_sources, integration_settings_in_force
from runs.alerts.refusals import REFUSED_KEEP_DAYS, refused_request_summary, refused_request_summary_by_source
from runs.alerts.selectors import alert_completeness, alert_count_unmatched, delivery_list_recent, integration_list
from runs.catalog.conventions import convention_text, integration_conventions, integration_conventions_update
from runs.catalog.forms import (
    IntegrationCustomCreateForm,
    IntegrationKeyCreateForm,
    IntegrationMappingForm,
    IntegrationTransportForm,
)
from runs.catalog.keys import source_can_sign
from runs.catalog.models import Integration, IntegrationKey
from runs.catalog.services import IssuedKey, integration_key_create, integration_key_url
from runs.catalog.settings_checks import integration_field_messages
from runs.catalog.transport import integration_transport, integration_transport_update, transport_values


@staff_member_required
def integration_list_view(request: HttpRequest) -> HttpResponse:
    """Admins: every integration with its source, active keys and delivery count; refused requests by source."""
    return render(
        request,
        "runs/catalog/integration_list.html",
        {
            "integrations": integration_list(user=request.user),
            "refused": refused_request_summary_by_source(),
            "keep_days": REFUSED_KEEP_DAYS,
            "sources": available_sources(),  # which refused addresses have a source page
        },
    )


@staff_member_required
def integration_detail_view(request: HttpRequest, id: str) -> HttpResponse:
    """Admins: an integration's effective settings, key prefixes and last use, recent deliveries."""
    integration = get_object_or_404(integration_list(user=request.user), public_id=id)
    effective, settings_wrong = integration_settings_in_force(integration)
    keys = integration.keys.prefetch_related("tenants").order_by("-created_at")
    is_custom = integration.source == SOURCE
    transport = integration_transport(integration=integration)
    conventions = [] if is_custom else _convention_rows(integration)
    return render(
        request,
        "runs/catalog/integration_detail.html",
        {
            "integration": integration,
            # a custom integration's mapping is shown as JSON below, not as one settings row
            # free JSON: a text no page can spell (a lone surrogate, SQLite only) shown as U+FFFD
            "settings": sorted(
                (k, v) for k, v in storable_data(effective).items() if not (is_custom and k == "mapping")
            ),
            "settings_problems": settings_wrong,
            # transport, security or mapping stored before its check (or around the admin): read as default
            "field_problems": integration_field_messages(source=integration.source, settings=integration.settings),
            "keys": keys,
            "deliveries": delivery_list_recent(integration=integration),
            # custom mappings, completeness, keys issued from the page
            "is_custom": is_custom,
            "mapping_json": _pretty(effective.get("mapping") or {}) if is_custom else "",
            "completeness": alert_completeness(integration=integration),
            "unmatched_count": alert_count_unmatched(integration=integration),
            "key_form": IntegrationKeyCreateForm(),
            "transport": transport,
            "transport_form": IntegrationTransportForm(
                initial={
                    "allow_get": transport.allow_get,
                    "decoder_kind": transport.decoder.get("kind", "json"),
                    "item_types": ", ".join(transport.decoder.get("item_types", [])),
                    BASE_FIELD: edit_base_field(transport_values(transport)),
                }
            ),
            "refused": refused_request_summary(integration=integration),
            "keep_days": REFUSED_KEEP_DAYS,
            "can_sign": source_can_sign(integration.source),
            # built-in sources: where the adapter reads each field, editable as named fields
            "conventions": conventions,
            "conventions_base": edit_base_field({key: shown for key, shown, _ in conventions}),
        },
    )


def _convention_rows(integration: Integration) -> list[tuple[str, str, bool]]:
    """(key, value as typed in the page, whether it is a list) for each convention in force."""
    return [
        (key, convention_text(value), isinstance(value, list))
        for key, value in integration_conventions(integration=integration).items()
    ]


@staff_member_required
@require_POST
def integration_conventions_view(request: HttpRequest, id: str) -> HttpResponse:
    """Admins: set a built-in integration's conventions (where its adapter reads each field); audited.

    Only the fields changed from what the page showed (``based_on``; without it, from what is stored
    now) are saved; one someone else changed meanwhile is refused (``handover.core.edits``)."""
    integration = get_object_or_404(integration_list(user=request.user), public_id=id)
    rows = _convention_rows(integration)
    base = edit_base_read(request.POST, [key for key, _, _ in rows], lambda _, v: str(v))
    values: dict[str, object] = {}
    for key, shown, is_list in rows:
        raw = request.POST.get(f"conv_{key}")
        if raw is None or raw.strip() == (base or {}).get(key, shown):
            continue  # unchanged: a default stays a default
        values[key] = [part.strip() for part in raw.split(",") if part.strip()] if is_list else raw.strip()
    try:
        integration_conventions_update(
            integration=integration,
            actor=person_or_none(request.user),
            values=values,
            based_on=None if base is None else {k: base[k] for k in values if k in base},
        )
    except DomainError as exc:
        errors = "; ".join(f"{k}: {' '.join(v)}" for k, v in (exc.errors or {}).items())
        messages.error(request, exc.detail if isinstance(exc, EditedMeanwhile) else errors)
    else:
        messages.success(request, "Conventions saved. Reprocess unmatched alerts to apply them to what is waiting.")
    return redirect("runs:integration-detail", id=integration.public_id)


def _pretty(document: object) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False)


ISSUED_SCOPE = "integration-key"


def _key_issued_redirect(request: HttpRequest, integration: Integration, issued: IssuedKey) -> HttpResponse:
    """POST -> redirect -> GET: stash the new secret once and send the admin to the page that shows it."""
    nonce = one_time_stash(
        request,
        scope=ISSUED_SCOPE,
        payload={"integration": str(integration.public_id), "key": str(issued.record.public_id), "secret": issued.key},
    )
    url = reverse("runs:integration-key-create", kwargs={"id": integration.public_id})
    return redirect(f"{url}?issued={nonce}")


def _key_issued(request: HttpRequest, integration: Integration) -> HttpResponse:
    """GET: the key just issued for ``integration``, shown this once (``Cache-Control: no-store``).

    A reload (the entry is gone), an expired or a foreign nonce go back to the integration page.
    """
    value = one_time_pop(request, scope=ISSUED_SCOPE, nonce=request.GET.get("issued", ""))
    record = (
        IntegrationKey.objects.filter(integration=integration, public_id=value["key"]).first()
        if value is not None and value.get("integration") == str(integration.public_id)
        else None
    )
    if value is None or record is None:
        messages.info(request, "A key's secret is shown only once, right after it is issued.")
        return redirect("runs:integration-detail", id=integration.public_id)
    issued = IssuedKey(record=record, key=value["secret"])
    is_url = record.kind == IntegrationKey.Kind.URL
    response = render(
        request,
        "runs/catalog/integration_key_issued.html",
        {
            "integration": integration,
            "issued": issued,
            "endpoint": f"/api/v1/alerts/{integration.source}/",
            "is_url": is_url,
            # the address the admin reached this page by is the one the sender reaches too
            "url": integration_key_url(
                source=integration.source, key=issued.key, base_url=request.build_absolute_uri("/")
            )
            if is_url
            else "",
        },
    )
    response["Cache-Control"] = "no-store"
    return response


@staff_member_required
def integration_create_view(request: HttpRequest) -> HttpResponse:
    """Admins: create a custom integration (name + mapping) and issue its first key, shown once."""
    form = IntegrationCustomCreateForm(request.POST or None, initial={"mapping": _pretty(STARTER_MAPPING)})
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        samples = [Sample(label="pasted sample", body=data["sample"])] if data.get("sample") else []
        try:
            integration, issued = integration_custom_create_with_key(
                name=data["name"],
                mapping=mapping_from_json(data["mapping"]),
                samples=samples,
                tenants=data["key_tenants"],
                all_tenants=data["key_all_tenants"],
                label=data["key_label"],
                created_by=signed_in(request.user),
            )
        except DomainError as exc:
            for path, errors in (exc.errors or {"__all__": [exc.detail]}).items():
                target = "name" if path == "name" else "mapping" if path.startswith("mapping") else None
                for error in errors:
                    form.add_error(target if target in form.fields else None, f"{path}: {error}")
        else:
            messages.success(request, f"Integration {integration.name!r} created.")
            return _key_issued_redirect(request, integration, issued)
    return render(
        request,
        "runs/catalog/integration_create.html",
        {"form": form, "fields": FIELD_HELP, "reference": _mapping_reference()},
    )


@staff_member_required
@require_http_methods(["GET", "POST"])
def integration_key_create_view(request: HttpRequest, id: str) -> HttpResponse:
    """Admins: POST issues another key for an integration, then redirects; GET shows the new secret, once."""
    integration = get_object_or_404(integration_list(user=request.user), public_id=id)
    if request.method == "GET":
        return _key_issued(request, integration)
    form = IntegrationKeyCreateForm(request.POST)
    if not form.is_valid():
        messages.error(request, " ".join(str(e) for errors in form.errors.values() for e in errors))
        return redirect("runs:integration-detail", id=integration.public_id)
    data = form.cleaned_data
    try:
        with submission_once(request) as sent:  # a double click issues one key, and shows it
            if sent.earlier is not None:
                messages.info(request, sent.notice)
                return redirect(
                    sent.earlier or reverse("runs:integration-detail", kwargs={"id": integration.public_id})
                )
            issued = integration_key_create(
                integration=integration,
                tenants=data["key_tenants"],
                all_tenants=data["key_all_tenants"],
                label=data["key_label"],
                created_by=signed_in(request.user),
                kind=data.get("key_kind") or IntegrationKey.Kind.HEADER,
            )
            response = _key_issued_redirect(request, integration, issued)
            sent.record(response["Location"])
    except DomainError as exc:
        messages.error(request, exc.detail)
        return redirect("runs:integration-detail", id=integration.public_id)
    return response


@staff_member_required
@require_POST
def integration_transport_view(request: HttpRequest, id: str) -> HttpResponse:
    """Admins: set an integration's GET ingestion and body decoder (POST, then back to the integration)."""
    integration = get_object_or_404(integration_list(user=request.user), public_id=id)
    form = IntegrationTransportForm(request.POST)
    if not form.is_valid():
        messages.error(request, " ".join(str(e) for errors in form.errors.values() for e in errors))
        return redirect("runs:integration-detail", id=integration.public_id)
    data = form.cleaned_data
    try:
        integration_transport_update(
            integration=integration,
            actor=person_or_none(request.user),
            allow_get=data["allow_get"],
            decoder_kind=data["decoder_kind"],
            item_types=[t for t in data["item_types"].split(",") if t.strip()],
            based_on=edit_base_read(request.POST, ["allow_get", "decoder"]),
        )
    except DomainError as exc:
        messages.error(request, " ".join(e for errors in (exc.errors or {"": [exc.detail]}).values() for e in errors))
    else:
        messages.success(request, "Transport settings saved.")
    return redirect("runs:integration-detail", id=integration.public_id)


def _mapping_reference() -> dict[str, object]:
    return {
        "fields": FIELD_HELP,
        "required": REQUIRED,
        "statuses": STATUSES,
        "signals": tuple(SIGNALS),
        "triggers": TRIGGERS,
        "time_formats": TIME_FORMATS,
        "window_rules": WINDOW_RULES,
        "scheduled_for_rules": SCHEDULED_FOR_RULES,
        "functions": sorted(FUNCTION_NAMES),
    }


def _delivery_label(delivery: Delivery) -> str:
    """How the editor's picker shows a delivery: when, its outcome, its alerts and how many are unmatched."""
    alerts = getattr(delivery, "alert_count", "?")
    unmatched = getattr(delivery, "unmatched_count", 0)
    waiting = f", {unmatched} unmatched" if unmatched else ""
    when = f"{delivery.received_at:%Y-%m-%d %H:%M:%S}Z"
    return f"{when} · {delivery.outcome} · {alerts} alert(s){waiting} · {delivery.size_bytes} B"


@staff_member_required
def integration_mapping_view(request: HttpRequest, id: str) -> HttpResponse:
    """Admins: a custom integration's mapping editor.

    GET shows the mapping, a box for a pasted payload and the integration's recent deliveries
    (``?delivery=<id>`` picks one). An htmx POST answers the result fragment: every sample mapped,
    with each field and every error. A plain POST with ``action=save`` saves the mapping only when it
    has no error and every chosen sample maps (at least one sample); otherwise the page shows why.
    """
    integration = get_object_or_404(integration_list(user=request.user), public_id=id)
    if integration.source != SOURCE:
        raise Http404("Only custom integrations have a mapping editor")
    recent = list(delivery_list_recent(integration=integration, limit=10))
    picked = [
        s.delivery_id
        for s in samples_from_deliveries(integration=integration, delivery_ids=[request.GET.get("delivery")])
    ]
    if picked and not any(str(d.public_id) == picked[0] for d in recent):
        recent += list(integration.deliveries.filter(public_id=picked[0]))
    choices = [(str(d.public_id), _delivery_label(d)) for d in recent]
    current = integration_mapping(integration)
    # Pre-tick the newest delivery that was parsed: a rejected or failed one can never map (Save would refuse)
    mappable = [str(d.public_id) for d in recent if d.outcome == Delivery.Outcome.PROCESSED][:1]
    initial = {
        "mapping": _pretty(current),
        "deliveries": picked or mappable,
        BASE_FIELD: edit_base_field({"mapping": current}),
    }
    # ?catalogue=<name>: start from a ready-made mapping and its first JSON sample (nothing saved until Save)
    entry = catalogue_entry(request.GET.get("catalogue", "")) if request.method != "POST" else None
    entry_sample = next((json.dumps(x["body"], indent=2) for x in entry.samples if "body" in x), "") if entry else ""
    if entry is not None:
        current = entry.mapping
        initial.update(mapping=_pretty(current), sample=entry_sample, deliveries=[])
    form = IntegrationMappingForm(request.POST or None, initial=initial, delivery_choices=choices)
    context: dict[str, object] = {
        "integration": integration,
        "form": form,
        "reference": _mapping_reference(),
        "unmatched_count": alert_count_unmatched(integration=integration),
        "catalogue": catalogue_entries(),
        "catalogue_entry": entry,
    }
    if request.method != "POST":
        samples = samples_from_deliveries(integration=integration, delivery_ids=initial["deliveries"])
        if entry_sample:
            samples.insert(0, Sample(label=f"{entry.name} sample", body=entry_sample))  # type: ignore[union-attr]
        context["preview"] = mapping_preview(mapping=current, samples=samples)
        return render(request, "runs/catalog/integration_mapping.html", context)
    if not form.is_valid():
        context["preview"] = None
        return render(request, "runs/catalog/integration_mapping.html", context, status=400)
    data = form.cleaned_data
    samples = samples_from_deliveries(integration=integration, delivery_ids=data["deliveries"])
    if data.get("sample", "").strip():
        samples.insert(0, Sample(label="pasted sample", body=data["sample"]))
    try:
        mapping = mapping_from_json(data["mapping"])
    except MappingInvalid as exc:
        context.update(preview=None, json_error=exc.detail)
    else:
        context["preview"] = mapping_preview(mapping=mapping, samples=samples)
        if data.get("action") == "save" and not is_htmx(request):
            try:
                integration_custom_update(
                    integration=integration,
                    mapping=mapping,
                    samples=samples,
                    require_samples=True,
                    actor=signed_in(request.user),
                    based_on=edit_base_read(request.POST, ["mapping"]),
                )
            except DomainError as exc:
                refused = isinstance(exc, EditedMeanwhile) or not exc.errors
                context["save_errors"] = {"": [exc.detail]} if refused else exc.errors
            else:
                messages.success(
                    request, f"Mapping saved: {len(samples)} sample(s) map. Reprocess unmatched alerts now."
                )
                return redirect("runs:integration-detail", id=integration.public_id)
    if is_htmx(request):
        return render(request, "runs/catalog/_integration_mapping_result.html", context)
    return render(
        request, "runs/catalog/integration_mapping.html", context, status=400 if context.get("save_errors") else 200
    )


@staff_member_required
def integration_mapping_export_view(request: HttpRequest, id: str) -> HttpResponse:
    """Admins: download the integration's mapping as JSON (paste it into another integration's editor to import)."""
    integration = get_object_or_404(integration_list(user=request.user), public_id=id)
    response = JsonResponse(
        integration_mapping_export(integration=integration), json_dumps_params={"indent": 2, "ensure_ascii": False}
    )
    response["Content-Disposition"] = (
        f'attachment; filename="{slugify(integration.name) or "integration"}-mapping.json"'
    )
    return response


@staff_member_required
@require_POST
def integration_reprocess_view(request: HttpRequest, id: str) -> HttpResponse:
    """Admins: reprocess this integration's unmatched alerts with its settings as they are now."""
    integration = get_object_or_404(integration_list(user=request.user), public_id=id)
    summary = integration_reprocess_unmatched(integration=integration, actor=signed_in(request.user))
    messages.success(request, summary.sentence())
    for failure in summary.failures[:5]:
        messages.warning(request, failure)
    return redirect("runs:integration-detail", id=integration.public_id)
