"""People's API tokens: django-rest-knox's authentication, recording each token's last use."""

from __future__ import annotations

import re
from typing import Any

from django.utils.translation import gettext_lazy as _
from drf_spectacular.contrib.knox_auth_token import KnoxTokenScheme
from knox.auth import TokenAuthentication as KnoxTokenAuthentication
from rest_framework import exceptions

# A token is "ho_" and hex digits; anything outside printable ASCII is refused before knox sees it
# (knox decodes the header as UTF-8 and queries with it: a Latin-1 byte or a NUL would be a 500).
_TOKEN_CHARACTERS = re.compile(rb"[\x21-\x7e]+")


class TokenAuthentication(KnoxTokenAuthentication):  # type: ignore[misc]  # django-rest-knox ships no type hints
    """``Authorization: Token …`` (hashed at rest, expiring: knox), plus ``ApiTokenUse.last_used_at``."""

    def authenticate_credentials(self, token: bytes) -> tuple[Any, Any]:
        # imported here: DRF imports this module while the apps' modules are still loading
        from handover.accounts.services import api_token_use_record

        if not _TOKEN_CHARACTERS.fullmatch(token):
            raise exceptions.AuthenticationFailed(_("Invalid token."))
        user, auth_token = super().authenticate_credentials(token)
        api_token_use_record(token=auth_token)
        return user, auth_token


class TokenAuthenticationScheme(KnoxTokenScheme):  # type: ignore[no-untyped-call]  # drf-spectacular's registration hook
    """The schema's security scheme for it: knox's, unchanged (registered on import)."""

    target_class = "handover.accounts.authentication.TokenAuthentication"
