"""Fields that are valid Determined config but that master_lite does not use (some only when
trials run as local processes, without `environment.image`)."""

from __future__ import annotations

from typing import Any

_NO_CONTAINERS = "ignored by master_lite (no pods or proxied ports)"
_NO_IMAGE = "ignored without environment.image (trials run as local processes)"

# (section, field, message): warn when config[section][field] is set to something non-default.
_IGNORED_FIELDS = [
    ("environment", "pod_spec", _NO_CONTAINERS),
    ("environment", "ports", _NO_CONTAINERS),
    ("environment", "proxy_ports", _NO_CONTAINERS),
    ("resources", "agent_label", "ignored (master_lite has a single agent: this machine)"),
]
# Used by trials in containers (environment.image), ignored by local processes.
_CONTAINER_FIELDS = [
    ("environment", "add_capabilities", _NO_IMAGE),
    ("environment", "drop_capabilities", _NO_IMAGE),
    ("environment", "force_pull_image", _NO_IMAGE),
    ("environment", "registry_auth", _NO_IMAGE),
    ("resources", "devices", _NO_IMAGE),
    ("resources", "shm_size", _NO_IMAGE),
]
_CONTAINER_SECTIONS = {
    "bind_mounts": (
        "ignored without environment.image (trials run as local processes and already see the "
        "host's files: use absolute host paths in your code instead)"
    ),
}
_IGNORED_SECTIONS = {
    "slurm": "ignored (master_lite runs trials locally, not through Slurm)",
    "pbs": "ignored (master_lite runs trials locally, not through PBS)",
    "integrations": "ignored by master_lite",
    "tensorboard_storage": "legacy field, ignored",
    "security": "legacy field, ignored",
    "data_layer": "legacy field, ignored",
}


def warnings(config: dict) -> list[str]:
    """Sorted ``"path: message"`` notes for settings that are accepted but have no effect here."""
    notes = [
        f"{section}: {message}"
        for section, message in _IGNORED_SECTIONS.items()
        if _is_set(config.get(section))
    ]
    fields = list(_IGNORED_FIELDS)
    if not _is_set((config.get("environment") or {}).get("image")):
        notes += [
            f"{section}: {message}"
            for section, message in _CONTAINER_SECTIONS.items()
            if _is_set(config.get(section))
        ]
        fields += _CONTAINER_FIELDS
    for section, field, message in fields:
        container = config.get(section)
        if isinstance(container, dict) and _is_set(container.get(field)):
            notes.append(f"{section}.{field}: {message}")
    return sorted(notes)


def _is_set(value: Any) -> bool:
    # False, "", [], {} and null are the defaults of every field above.
    return bool(value)
