"""Image names as Determined writes them: Docker Hub for bare names, and its published
environment images.

Determined's example configs name its own published images (`determinedai/environments:...`,
`determinedai/tensorflow-ngc:0.38.1`, `determinedai/pytorch-ngc:...`, and per slot type
`environment.image: {cpu: ..., cuda: ...}`). They mean "Determined's standard Python and
framework environment". Where such an image is not in the local store (and, written without a
registry, is never pulled here), a trial runs in the master's own environment as a host process
instead, with one line in its log saying so; `MasterLite.determined_images_fallback` turns that
off (the image is then refused at submit like any other missing image).
"""

from __future__ import annotations

import re

from determined.common.containers import registry_of

# The repositories Determined publishes its trial environments under (on Docker Hub).
_DETERMINED_REPOSITORY = re.compile(
    r"^determinedai/(environments(-[\w.-]+)?|[\w.-]*-ngc[\w.-]*|pytorch-[\w.-]+|tensorflow-[\w.-]+)$"
)
_DOCKER_HUB = ("docker.io/", "index.docker.io/", "registry-1.docker.io/")

FALLBACK_SETTING = (
    "MasterLite.determined_images_fallback (env MASTER_LITE_DETERMINED_IMAGES_FALLBACK)"
)


def _repository(image: str) -> str:
    """`image` without its tag or digest (`determinedai/environments:py-3.9` ->
    `determinedai/environments`)."""
    name = image.split("@", 1)[0]
    last_slash = name.rfind("/")
    colon = name.rfind(":")
    return name[:colon] if colon > last_slash else name


def is_determined_image(image: str) -> bool:
    """Whether `image` is one of Determined's published environment images, written bare
    (`determinedai/tensorflow-ngc:0.38.1`) or with Docker Hub's name (`docker.io/...`)."""
    repository = _repository(image)
    for prefix in _DOCKER_HUB:
        if repository.startswith(prefix):
            repository = repository[len(prefix) :]
            break
    return bool(_DETERMINED_REPOSITORY.match(repository))


def docker_hub_reference(image: str) -> str:
    """The Docker Hub reference a bare name means, as Docker and Determined read it:
    `docker.io/library/<name>` for an official image (one path component, `python:3.12`),
    `docker.io/<name>` for the rest (`determinedai/tensorflow-ngc:0.38.1`)."""
    if registry_of(image) is not None:
        return image
    if "/" in _repository(image):
        return f"docker.io/{image}"
    return f"docker.io/library/{image}"


def fallback_note(image: str, reason: str) -> str:
    """The trial log's line for a run of a Determined image that runs as a host process."""
    return (
        f"master-lite: environment.image {image!r} is Determined's published environment image "
        f"and {reason}: this trial runs in the master's own Python environment (a host "
        f"process) instead, as Determined's standard environment; set {FALLBACK_SETTING} to "
        "false to refuse such experiments instead"
    )


__all__ = ["FALLBACK_SETTING", "docker_hub_reference", "fallback_note", "is_determined_image"]
