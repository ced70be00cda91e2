"""E-mail through Django's mail backend (console by default; ``EMAIL_BACKEND`` in the environment)."""

from __future__ import annotations

import smtplib

from django.core.mail import send_mail

from handover.handovers.models import Handover, HandoverNotification
from handover.handovers.notifiers.base import Delivered, PermanentError, TransientError, handover_message


def send(*, notification: HandoverNotification, handover: Handover) -> Delivered:
    """Send the handover's message to the notification's recipient.

    Raises PermanentError when the recipient has no address or the server refuses it, and
    TransientError for connection and server errors (the task retries).
    """
    address = getattr(notification.recipient, "email", "") if notification.recipient_id else ""
    if not address:
        raise PermanentError("The recipient has no e-mail address.")
    subject, text = handover_message(handover)
    try:
        send_mail(subject=subject, message=text, from_email=None, recipient_list=[address], fail_silently=False)
    except smtplib.SMTPRecipientsRefused as exc:
        raise PermanentError(f"The mail server refused the recipient: {exc}") from exc
    except (smtplib.SMTPException, OSError) as exc:
        raise TransientError(f"{type(exc).__name__}: {exc}") from exc
    return Delivered()
