"""The one set of rules for calls this site makes to addresses people type in (SSRF).

Replay webhooks (``approvals.replays.webhook_client``) and chat/push targets
(``handover.notifications.apprise_targets``) are checked here: a target that is, or resolves to, a
loopback, private, link-local, reserved, multicast or unspecified address is refused unless its
host is on the caller's allow-list. The replay webhook then connects to the address it checked;
Apprise resolves the name again when it sends, so a name whose DNS answer changes between the check
and the send (DNS rebinding) can still reach an internal address -- docs/security.md "Outbound calls".
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class TargetRefused(Exception):
    """The target is internal (or malformed) and not allow-listed: never worth retrying."""


class TargetUnresolved(Exception):
    """The name does not resolve now (DNS may come back): worth retrying."""


def address_is_internal(address: Address) -> bool:
    """Whether ``address`` is loopback, private, link-local, reserved, multicast or unspecified."""
    return (
        address.is_loopback
        or address.is_private
        or address.is_link_local
        or address.is_reserved
        or address.is_multicast
        or address.is_unspecified
    )


def literal_is_internal(host: str) -> bool:
    """Whether ``host`` is an IP literal that is internal (a name is not judged here: no DNS lookup)."""
    try:
        return address_is_internal(ipaddress.ip_address(host.strip("[]")))
    except ValueError:
        return host.lower() in ("localhost", "localhost.localdomain") or host.lower().endswith(".localhost")


def host_resolve_checked(host: str, port: int, *, allowed_hosts: Iterable[str] = ()) -> str:
    """Resolve ``host`` and return the first address, refusing internal ones unless ``host`` is allow-listed.

    Raises TargetRefused for an internal address (any of the answers) and TargetUnresolved when the
    name does not resolve.
    """
    allowed = host in set(allowed_hosts)
    if not allowed and literal_is_internal(host):
        raise TargetRefused(f"{host} is a loopback, private or link-local address.")
    try:
        infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    except OSError as exc:
        raise TargetUnresolved(f"Cannot resolve {host}: {exc}") from exc
    if not infos:
        raise TargetUnresolved(f"{host} has no address.")
    if not allowed:
        for info in infos:
            if address_is_internal(ipaddress.ip_address(info[4][0])):
                raise TargetRefused(f"{host} resolves to a loopback, private or link-local address.")
    return str(infos[0][4][0])
