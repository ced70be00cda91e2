"""The notifications page (/notifications/) and the person's profile (/profile/): notification address
(changed with the password, verified by mail), time zone, preferences per event and channel, and chat/push
targets (Apprise URLs, masked) with "send test". Only the signed-in person's own rows are ever found."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from handover.accounts.preference_models import UserPreference
from handover.accounts.preferences import user_preference_set
from handover.core.errors import DomainError
from handover.core.polling import list_page
from handover.notifications.events import CHANNELS, EVENTS, channel_default
from handover.notifications.forms import (
    AppriseTargetForm,
    EmailChangeForm,
    PreferencesForm,
    TimeZoneForm,
    time_zone_names,
)
from handover.notifications.models import AppriseTarget, Notification, NotificationEmail, NotificationPreference
from handover.notifications.selectors import (
    apprise_target_list,
    notification_filter_choices,
    notification_list,
    notification_list_state,
    team_list_of,
)
from handover.notifications.services import (
    apprise_target_add,
    apprise_target_test,
    apprise_targets_for,
    notification_email_address,
    notification_email_change,
    notification_email_verify,
    notification_mark_read,
    notification_preferences_set,
)


@login_required
def notification_list_view(request: HttpRequest) -> HttpResponse:
    """The person's notifications, newest first, unread marked, with how each channel did.

    Filters: ``show`` (``all``, ``unread``, ``read``), ``event`` (kind), ``job`` and ``tenant``. Polled
    by htmx every 30 seconds: the list's fragment, or 304 while unchanged (``handover.core.polling``).
    """
    show = request.GET.get("show", "all")
    event = request.GET.get("event") or ""
    job_key = request.GET.get("job") or ""
    tenant_slug = request.GET.get("tenant") or ""

    def context() -> dict[str, object]:
        rows = notification_list(
            user=request.user,
            unread={"unread": True, "read": False}.get(show),
            event=event if event in Notification.Event.values else None,
            job_key=job_key or None,
            tenant_slug=tenant_slug or None,
        )
        choices = notification_filter_choices(user=request.user)
        labels = dict(Notification.Event.choices)
        return {
            "rows": list(rows[:200]),
            "show": show,
            "show_choices": [("all", "all"), ("unread", "unread"), ("read", "read")],
            "event": event,
            "job": job_key,
            "tenant": tenant_slug,
            "choices": choices,
            "event_choices": [(value, labels.get(value, value)) for value in choices["events"]],
        }

    return list_page(
        request,
        template="handover/notifications/notification_list.html",
        fragment="handover/notifications/_notification_rows.html",
        context=context,
        state=lambda: notification_list_state(user=request.user),
    )


@login_required
@require_POST
def notification_read_view(request: HttpRequest) -> HttpResponse:
    """POST: mark one notification (``id``) or all unread ones read; back to the list."""
    one = request.POST.get("id")
    try:
        marked = notification_mark_read(user=request.user, public_ids=[one] if one else None)  # type: ignore[arg-type]
    except Exception as exc:  # a malformed id: nothing of yours has it
        raise Http404("No such notification") from exc
    if not one:
        messages.success(request, f"{marked} notification(s) marked read.")
    return redirect("handover:notification-list")


def _me(request: HttpRequest) -> int:
    """The signed-in person's primary key (views here are ``login_required``)."""
    return int(request.user.pk or 0)


def _current_preferences(request: HttpRequest) -> dict[tuple[str, str], bool]:
    chosen = {(p.event, p.channel): p.enabled for p in NotificationPreference.objects.filter(user_id=_me(request))}
    has_chat = bool(apprise_targets_for(user=request.user))  # type: ignore[arg-type]
    return {
        (event, channel): chosen.get(
            (event, channel), channel_default(event, channel) and (channel != "chat" or has_chat)
        )
        for event, _ in EVENTS
        for channel, _ in CHANNELS
    }


def _profile_page(request: HttpRequest, status: int = 200, **forms_given: object) -> HttpResponse:
    current = _current_preferences(request)
    preference = UserPreference.objects.filter(user_id=_me(request)).first()
    email_row = NotificationEmail.objects.filter(user_id=_me(request)).first()
    grid = [
        {"event": event, "label": label, "cells": [(f"{event}__{c}", current[(event, c)]) for c, _ in CHANNELS]}
        for event, label in EVENTS
    ]
    context = {
        "email_form": EmailChangeForm(),
        "zone_form": TimeZoneForm(initial={"time_zone": preference.time_zone if preference else "UTC"}),
        "target_form": AppriseTargetForm(),
        "zones": time_zone_names(),
        "grid": grid,
        "channels": CHANNELS,
        "verified_email": notification_email_address(user=request.user),  # type: ignore[arg-type]
        "pending_email": email_row.pending if email_row else "",
        "targets": list(apprise_target_list(user=request.user)),
        "teams": list(team_list_of(user=request.user)),
        **forms_given,
    }
    return render(request, "handover/notifications/profile.html", context, status=status)


@login_required
def profile_view(request: HttpRequest) -> HttpResponse:
    """The profile page: every form posts to its own URL and comes back here."""
    return _profile_page(request)


@login_required
@require_POST
def profile_email_view(request: HttpRequest) -> HttpResponse:
    """POST: change the notification address (password re-entered); a verification mail goes to the new one."""
    form = EmailChangeForm(request.POST)
    if not form.is_valid():
        return _profile_page(request, status=400, email_form=form)
    try:
        notification_email_change(
            user=request.user,  # type: ignore[arg-type]
            password=form.cleaned_data["password"],
            address=form.cleaned_data["email"],
        )
    except DomainError as exc:
        form.add_error("password", exc.detail)
        return _profile_page(request, status=400, email_form=form)
    messages.success(
        request,
        f"A verification link was mailed to {form.cleaned_data['email']}: notifications go there once you follow it.",
    )
    return redirect("handover:profile")


@login_required
def profile_email_verify_view(request: HttpRequest, token: str) -> HttpResponse:
    """GET (from the mail): the pending address becomes the notification address."""
    try:
        row = notification_email_verify(token=token, user=request.user)  # type: ignore[arg-type]
    except DomainError as exc:
        messages.error(request, exc.detail)
        return redirect("handover:profile")
    messages.success(request, f"Notifications now go to {row.verified}.")
    return redirect("handover:profile")


@login_required
@require_POST
def profile_time_zone_view(request: HttpRequest) -> HttpResponse:
    """POST: the zone times are shown in (from the IANA list)."""
    form = TimeZoneForm(request.POST)
    if not form.is_valid():
        return _profile_page(request, status=400, zone_form=form)
    user_preference_set(user=request.user, time_zone=form.cleaned_data["time_zone"])  # type: ignore[arg-type]
    messages.success(request, f"Times are now shown in {form.cleaned_data['time_zone']}.")
    return redirect("handover:profile")


@login_required
@require_POST
def profile_preferences_view(request: HttpRequest) -> HttpResponse:
    """POST: which events reach the person on which channel."""
    form = PreferencesForm(request.POST, current=_current_preferences(request))
    form.is_valid()
    notification_preferences_set(user=request.user, choices=form.choices())  # type: ignore[arg-type]
    messages.success(request, "Notification preferences saved.")
    return redirect("handover:profile")


@login_required
@require_POST
def profile_target_add_view(request: HttpRequest) -> HttpResponse:
    """POST: add a chat/push target (refused off the allow-list or to an internal address)."""
    form = AppriseTargetForm(request.POST)
    if not form.is_valid():
        return _profile_page(request, status=400, target_form=form)
    try:
        target = apprise_target_add(
            url=form.cleaned_data["url"],
            user=request.user,  # type: ignore[arg-type]
            label=form.cleaned_data["label"],
        )
    except DomainError as exc:
        form.add_error("url", exc.detail)
        return _profile_page(request, status=400, target_form=form)
    messages.success(request, f"Chat/push target {target.url_masked} added.")
    return redirect("handover:profile")


def _own_target(request: HttpRequest, id: str) -> AppriseTarget:
    target = apprise_target_list(user=request.user).filter(public_id=id).first()
    if target is None:
        raise Http404("No such target")
    return target


@login_required
@require_POST
def profile_target_delete_view(request: HttpRequest, id: str) -> HttpResponse:
    """POST: remove one of the person's chat/push targets."""
    target = _own_target(request, id)
    target.delete()
    messages.success(request, f"Chat/push target {target.url_masked} removed.")
    return redirect("handover:profile")


@login_required
@require_POST
def profile_target_test_view(request: HttpRequest, id: str) -> HttpResponse:
    """POST: send a test message now (the same refusals as any send); says whether the service took it."""
    target = _own_target(request, id)
    try:
        accepted = apprise_target_test(target=target)
    except DomainError as exc:
        messages.error(request, f"Not sent to {target.url_masked}: {exc.detail}")
        return redirect("handover:profile")
    if accepted:
        messages.success(request, f"Test message accepted by {target.url_masked}.")
    else:
        messages.error(request, f"{target.url_masked} did not accept the test message (see the server log).")
    return redirect("handover:profile")
