"""Secrets in experiment configs: kept in the store for the runners, never given back.

The secret fields: `environment.registry_auth`'s password, auth, identitytoken and
registrytoken (the container runner logs in with them), and the token and headers of a kernel
gateway given as `{url, token, headers}` in `environment.kernel.gateway` or
`environment.jupyter_gateway` (the kernel runner opens kernels with them), and the
`access_key`/`secret_key` of `checkpoint_storage` (s3: the master and the trials sign with them;
a trial gets them in its own variable, runs/_environment.py). Every response that
carries a config (experiment JSON, the config endpoint, the unmanaged run's config, and so the
events, exports and clients built on them) goes through `redact_config`: each secret present
becomes `REDACTED`. A config submitted with `REDACTED` in a secret's place (a fetched config
sent back) never stores the stars: a fork gets its parent's secret back (`restore_secrets`),
anything else is refused naming the field (`submitted_secrets`); an edit (PATCH) never touches
the secrets.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from master_lite import errors

REDACTED = "********"

_REGISTRY_SECRETS = ("password", "auth", "identitytoken", "registrytoken")
_GATEWAY_SECRETS = ("token", "headers")
_STORAGE_SECRETS = ("access_key", "secret_key")


def _secret_homes(config: Any) -> Iterator[tuple[str, dict, tuple[str, ...]]]:
    """(where, the dict holding secrets, the names of its secret keys) in `config`."""
    if not isinstance(config, dict):
        return
    storage = config.get("checkpoint_storage")
    if isinstance(storage, dict):
        yield "checkpoint_storage", storage, _STORAGE_SECRETS
    environment = config.get("environment")
    if not isinstance(environment, dict):
        return
    registry = environment.get("registry_auth")
    if isinstance(registry, dict):
        yield "registry_auth", registry, _REGISTRY_SECRETS
    gateway = environment.get("jupyter_gateway")
    if isinstance(gateway, dict):
        yield "jupyter_gateway", gateway, _GATEWAY_SECRETS
    kernel = environment.get("kernel")
    if isinstance(kernel, dict) and isinstance(kernel.get("gateway"), dict):
        yield "kernel.gateway", kernel["gateway"], _GATEWAY_SECRETS


def _hide(value: Any) -> Any:
    if isinstance(value, dict):  # headers: names stay visible, values do not
        return {name: REDACTED for name in value}
    return REDACTED


def has_secrets(config: Any) -> bool:
    """Whether `config` holds a secret that `redact_config` would hide."""
    return any(home.get(key) is not None for _, home, keys in _secret_homes(config) for key in keys)


def redact_config(config: Any) -> Any:
    """`config` with every secret value replaced by `REDACTED` (a copy when there is one;
    the config given is never changed)."""
    if not has_secrets(config):
        return config
    redacted = copy.deepcopy(config)
    for _, home, keys in _secret_homes(redacted):
        for key in keys:
            if home.get(key) is not None:
                home[key] = _hide(home[key])
    return redacted


def _restore(value: Any, stored: Any) -> Any:
    if value == REDACTED:
        return stored
    if isinstance(value, dict) and isinstance(stored, dict):
        return {
            name: stored.get(name, item) if item == REDACTED else item
            for name, item in value.items()
        }
    return value


def restore_secrets(config: Any, stored: Any) -> Any:
    """`config` with each `REDACTED` secret replaced by the same secret of `stored` (the
    config the secret was redacted from); other values are kept as given. A copy when a
    secret is restored; `config` itself is never changed."""
    if not has_secrets(config) or not has_secrets(stored):
        return config
    restored = copy.deepcopy(config)
    stored_homes = {where: home for where, home, _ in _secret_homes(stored)}
    # environment.jupyter_gateway is the other spelling of environment.kernel.gateway.
    aliases = {"jupyter_gateway": "kernel.gateway", "kernel.gateway": "jupyter_gateway"}
    for where, home, keys in _secret_homes(restored):
        source = stored_homes.get(where) or stored_homes.get(aliases.get(where, ""))
        if source is None:
            continue
        for key in keys:
            if key in home:
                home[key] = _restore(home[key], source.get(key))
    return restored


def redacted_fields(config: Any) -> list[str]:
    """The secrets of `config` that are still `REDACTED` (nothing to restore them from): a
    submission refuses them rather than logging in with stars."""
    found = []
    for where, home, keys in _secret_homes(config):
        for key in keys:
            value = home.get(key)
            if value == REDACTED or (isinstance(value, dict) and REDACTED in value.values()):
                found.append(
                    f"{where}.{key}"
                    if where == "checkpoint_storage"
                    else f"environment.{where}.{key}"
                )
    return found


def submitted_secrets(config: dict, parent: dict | None = None) -> dict:
    """A submitted `config` with `REDACTED` secrets taken from `parent` (the config of the
    experiment it was fetched from, for a fork); InvalidRequest naming any secret that is still
    `REDACTED` (the master would log in with the stars)."""
    if parent is not None:
        config = restore_secrets(config, parent)
    stars = redacted_fields(config)
    if stars:
        raise errors.InvalidRequest(
            f"invalid experiment config: {', '.join(stars)}: {REDACTED!r} is a redacted secret "
            "(the API never returns secrets): give the real value"
        )
    return config


__all__ = [
    "REDACTED",
    "has_secrets",
    "redact_config",
    "redacted_fields",
    "restore_secrets",
    "submitted_secrets",
]
