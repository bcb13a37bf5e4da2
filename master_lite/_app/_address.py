"""The advertised URL: the address trials (and clients on other machines) use to reach the
master, distinct from the address it binds.

The rule (docs/distributed.md, "The address trials use"):

1. `advertised_url` (`--advertised-url`, `MASTER_LITE_ADVERTISED_URL`) when set, as given.
2. Bound to one address (`--host 10.0.0.5`, or the default 127.0.0.1): that address.
3. Bound to every address (`0.0.0.0`, `::`, or empty): the address of this host's interface
   that routes toward the Ray head (resource_manager 'ray' with a `host:port` or `ray://`
   address), else toward the default route (the host's primary non-loopback address); else the
   host's fully qualified name when it resolves to a non-loopback address; else loopback.

Finding the routed address sends nothing: a UDP socket `connect` only asks the kernel's
routing table which source address it would use.
"""

from __future__ import annotations

import ipaddress
import socket
import urllib.parse

from determined.common.util import routed_address

# Documentation addresses (RFC 5737, RFC 3849): never reached, only routed.
_PROBE_V4 = "192.0.2.1"
_PROBE_V6 = "2001:db8::1"
WILDCARD_HOSTS = ("", "0.0.0.0", "::", "*")


def check_advertised_url(value: str, name: str = "advertised_url") -> str:
    """`value` normalised (no trailing '/'), or ValueError saying what is wrong with it.

    An http(s) URL with a host, an optional port and an optional path (a JupyterHub
    service's prefix): no user, query or fragment, and not a wildcard address (a trial
    cannot connect to 0.0.0.0)."""
    raw = value.strip()
    if not raw:
        return ""
    how = (
        f"{name}: {value!r} is not a URL trials can use; give http(s)://HOST:PORT, e.g. "
        "http://10.0.0.5:8080 or http://master.example.com:8080"
    )
    try:
        parts = urllib.parse.urlsplit(raw)
        port = parts.port  # ValueError when not a number in 0..65535
    except ValueError:
        raise ValueError(how) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(how)
    if parts.username or parts.password or parts.query or parts.fragment:
        raise ValueError(f"{how} (no user, query or fragment)")
    if port == 0:
        raise ValueError(f"{how} (port 0 is not an address)")
    if parts.hostname in ("0.0.0.0", "::"):
        raise ValueError(f"{how} ({parts.hostname} is where a server listens, not an address)")
    if " " in raw:
        raise ValueError(how)
    return raw.rstrip("/")


def _format_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _fqdn_address(family: int) -> str | None:
    """The host's fully qualified name, when it resolves to a non-loopback address."""
    name = socket.getfqdn()
    try:
        infos = socket.getaddrinfo(name, None, family)
    except (OSError, UnicodeError):
        return None
    for *_, address in infos:
        if not ipaddress.ip_address(str(address[0]).split("%")[0]).is_loopback:
            return name
    return None


def ray_head_host(ray_address: str | None) -> str | None:
    """The Ray head's host in a `host:port` or `ray://host:port` address (None for 'auto',
    'local' or nothing: then this host is part of the cluster, and the default route serves)."""
    if not ray_address or ray_address in ("auto", "local"):
        return None
    try:
        return urllib.parse.urlsplit(
            ray_address if "://" in ray_address else f"//{ray_address}"
        ).hostname
    except ValueError:
        return None


def derived_host(bind_host: str, toward: str | None = None) -> str:
    """The host part (bracketed for IPv6) of the advertised URL of a master bound to
    `bind_host`, by the module's rule (2 and 3)."""
    if bind_host not in WILDCARD_HOSTS:
        return _format_host(bind_host)
    family = socket.AF_INET6 if bind_host == "::" else socket.AF_INET
    probe = _PROBE_V6 if family == socket.AF_INET6 else _PROBE_V4
    for target in (toward, probe):
        if target:
            found = routed_address(target, family)
            if found and not ipaddress.ip_address(found).is_loopback:
                return _format_host(found)
    name = _fqdn_address(family)
    if name:
        return name
    return "[::1]" if family == socket.AF_INET6 else "127.0.0.1"


def local_host(bind_host: str) -> str:
    """The host a client on this machine connects to (loopback for a wildcard bind)."""
    if bind_host in ("", "0.0.0.0", "*"):
        return "127.0.0.1"
    if bind_host == "::":
        return "[::1]"
    return _format_host(bind_host)


__all__ = [
    "WILDCARD_HOSTS",
    "check_advertised_url",
    "derived_host",
    "local_host",
    "ray_head_host",
    "routed_address",
]
