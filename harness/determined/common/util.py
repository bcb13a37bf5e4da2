"""`determined.common.util`: the helpers of Determined's module of that name that its examples,
harness tests and e2e fixtures import (YAML as Determined reads it, the legacy metric group
names, `chunks`, `sizeof_fmt`, `wait_for`, `deprecated`, `strtobool`, ...).

YAML here is ruamel's YAML 1.2 safe mode, as Determined's (`1e-3` is a float, `yes` a string).
Configs are read by `determined.common.expconf.load`, which also keeps dates as text and names
duplicate keys; these are the plain loaders Determined's own code calls.
"""

from __future__ import annotations

import functools
import io
import ipaddress
import os
import pathlib
import platform
import random
import socket
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Any, TypeVar

# The metric groups Determined's older APIs report under (its trial controllers use them).
_LEGACY_TRAINING = "training"
_LEGACY_VALIDATION = "validation"
_INFERENCE = "inference"

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


def _yaml(default_flow_style: bool | None = None) -> Any:
    from ruamel.yaml import YAML

    parser = YAML(typ="safe", pure=True)
    if default_flow_style is not None:
        parser.default_flow_style = default_flow_style
    return parser


def chunks(lst: Sequence[T], chunk_size: int) -> Iterator[Sequence[T]]:
    """Consecutive slices of `lst` of `chunk_size` items (the last may be shorter):
    `chunks("ABCDEFG", 3)` gives "ABC", "DEF", "G"."""
    if chunk_size < 1:
        raise ValueError(f"chunks: chunk_size must be at least 1, got {chunk_size}")
    for start in range(0, len(lst), chunk_size):
        yield lst[start : start + chunk_size]


def sizeof_fmt(val: int | float) -> str:
    """A byte count for people, as Determined writes it: `1.5KB`, `3.0MB`."""
    size = float(val)
    for unit in ("", "K", "M", "G", "T", "P", "E", "Z"):
        if abs(size) < 1024.0:
            return f"{size:3.1f}{unit}B"
        size /= 1024.0
    return f"{size:.1f}YB"


def debug_mode() -> bool:
    """Whether `DET_DEBUG` is set to true, 1 or yes."""
    return os.getenv("DET_DEBUG", "").lower() in ("true", "1", "yes")


def preserve_random_state(fn: F) -> F:
    """Decorate `fn` so that Python's `random` state is the same after it as before."""

    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        state = random.getstate()
        try:
            return fn(*args, **kwargs)
        finally:
            random.setstate(state)

    return wrapped  # type: ignore[return-value]


def yaml_safe_dump(
    data: Any, stream: IO[Any] | None = None, default_flow_style: bool | None = None
) -> Any:
    """Write `data` as YAML to `stream`; without one, return the text."""
    if stream is not None:
        return _yaml(default_flow_style).dump(data, stream=stream)
    out = io.StringIO()
    _yaml(default_flow_style).dump(data, stream=out)
    return out.getvalue()


def yaml_safe_load(f: IO[Any] | str) -> Any:
    """Parse YAML 1.2 text or an open file (safe types only)."""
    return _yaml().load(f)


def safe_load_yaml_with_exceptions(yaml_file: IO[Any] | str) -> Any:
    """`yaml_safe_load`, where a malformed document (or a duplicate key) raises a ValueError
    that names the problem and where it is, without ruamel's internals. (Determined's prints
    the same and exits the process.)"""
    from ruamel.yaml.error import MarkedYAMLError

    try:
        return _yaml().load(yaml_file)
    except MarkedYAMLError as e:
        name = getattr(yaml_file, "name", None)
        where = f" {name}" if isinstance(name, str) else ""
        raise ValueError(
            f"invalid experiment config file{where}: {type(e).__name__}: {e.problem} "
            f"{e.problem_mark}"
        ) from None


def get_config_path() -> pathlib.Path:
    """Where Determined keeps its client settings: `$DET_DEBUG_CONFIG_PATH`, else the
    platform's user configuration directory plus `determined`."""
    if os.environ.get("DET_DEBUG_CONFIG_PATH"):
        return pathlib.Path(os.environ["DET_DEBUG_CONFIG_PATH"])
    system = platform.system()
    if system == "Linux" and "XDG_CONFIG_HOME" in os.environ:
        base = pathlib.Path(os.environ["XDG_CONFIG_HOME"])
    elif system == "Darwin":
        base = pathlib.Path.home() / "Library" / "Application Support"
    elif system == "Windows" and "LOCALAPPDATA" in os.environ:
        base = pathlib.Path(os.environ["LOCALAPPDATA"])
    else:
        base = pathlib.Path.home() / ".config"
    return base / "determined"


def wait_for(
    predicate: Callable[[], tuple[bool, T]], timeout: float = 60, interval: float = 0.1
) -> T:
    """Call `predicate` (which returns `(done, value)`) every `interval` seconds until it is
    done; its value. TimeoutError after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        done, value = predicate()
        if done:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"wait_for: not done after {timeout} s")
        time.sleep(interval)


def deprecated(message: str | None = None) -> Callable[[F], F]:
    """Decorate a function so that each call warns (DeprecationWarning) that it is deprecated,
    with `message` after."""

    def decorator(func: F) -> F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            text = f"{func.__name__} is deprecated and will be removed in a future version."
            if message:
                text += f" {message}."
            warnings.warn(text, category=DeprecationWarning, stacklevel=2)
            return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorator


def strtobool(val: str) -> bool:
    """distutils' `strtobool` as Determined keeps it: false for an empty string and n, no, f,
    false, off, 0 (any case); true for anything else."""
    return bool(val) and val.lower() not in ("n", "no", "f", "false", "off", "0")


def routed_address(toward: str, family: int = 0) -> str | None:
    """This host's source address for packets to `toward` (a host name or address), per the
    routing table (a UDP `connect` sends nothing); None when there is no route or no such name.
    `family` narrows it (socket.AF_INET, AF_INET6; 0: either)."""
    try:
        infos = socket.getaddrinfo(toward, 9, family, socket.SOCK_DGRAM)
    except (OSError, UnicodeError):
        return None
    for info_family, kind, proto, _, address in infos:
        try:
            with socket.socket(info_family, kind, proto) as probe:
                probe.connect(address)
                mine = str(probe.getsockname()[0]).split("%")[0]
        except OSError:
            continue
        if mine and not ipaddress.ip_address(mine).is_unspecified:
            return mine
    return None
