"""Context tarballs: pack a model directory for upload, unpack an uploaded one safely.

`pack` is deterministic (sorted names, mtime 0, uid/gid 0, normalised modes, gzip mtime 0), so
identical directories give identical bytes and the master can store each context once by hash.
`unpack` validates every member before it writes anything: no absolute paths, no `..`, no links
leaving the destination, no devices or fifos, and a cap on the total uncompressed size.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import io
import os
import pathlib
import posixpath
import re
import stat
import sys
import tarfile
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence

# The largest context (file content, before compression): `pack` refuses more, and the master's
# default `context_size_limit` (upload check, `unpack`, HTTP body limit) is this same number.
DEFAULT_LIMIT_BYTES = 96 * 1024 * 1024
# What a member's path may be: a component at most NAME_MAX (255 bytes on Linux and macOS), the
# whole at most 3 KiB, which leaves 1 KiB of PATH_MAX (4096) for the directory it unpacks under.
MAX_MEMBER_NAME_BYTES = 255
MAX_MEMBER_PATH_BYTES = 3 * 1024
DETIGNORE = ".detignore"


class ContextError(ValueError):
    """The context cannot be packed or an archive is unsafe or malformed."""


class ContextTooLarge(ContextError):
    """The context is over the size limit; the message names the largest files."""


# ---------------------------------------------------------------------------------------------
# .detignore (a gitignore subset)


@dataclasses.dataclass(frozen=True)
class IgnoreRule:
    pattern: str  # as written, for messages
    regex: re.Pattern
    negated: bool
    dir_only: bool


def _glob_to_regex(glob: str) -> str:
    """Translate one gitignore glob (already stripped of `!`, leading and trailing `/`)."""
    out = []
    i, n = 0, len(glob)
    while i < n:
        c = glob[i]
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")  # zero or more directories
            i += 3
        elif glob.startswith("/**", i) and i + 3 == n:
            out.append("/.*")  # everything inside
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            end = glob.find(
                "]", i + 2 if glob.startswith("[!", i) or glob.startswith("[]", i) else i + 1
            )
            if end == -1:
                out.append(re.escape(c))
                i += 1
            else:
                body = glob[i + 1 : end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end + 1
        elif c == "\\" and i + 1 < n:
            out.append(re.escape(glob[i + 1]))
            i += 2
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)


def parse_ignore(lines: Iterable[str]) -> list[IgnoreRule]:
    """Parse `.detignore` lines: globs, `dir/`, `**`, `!negation`, `#` comments, anchored `/x`."""
    rules = []
    for raw in lines:
        line = raw.rstrip("\n").rstrip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        if negated:
            line = line[1:]
        elif line.startswith("\\#") or line.startswith("\\!"):
            line = line[1:]
        dir_only = line.endswith("/")
        line = line.rstrip("/")
        if not line:
            continue
        # A slash at the start or in the middle anchors the pattern to the context root;
        # otherwise it matches a name at any depth.
        anchored = "/" in line
        line = line.lstrip("/")
        body = _glob_to_regex(line)
        prefix = "" if anchored or line.startswith("**") else "(?:.*/)?"
        rules.append(
            IgnoreRule(raw.strip(), re.compile(f"^{prefix}{body}$", re.S), negated, dir_only)
        )
    return rules


def is_ignored(rules: Sequence[IgnoreRule], relpath: str, is_dir: bool) -> bool:
    """gitignore semantics: the last matching rule wins. (Like git, a file inside an ignored
    directory cannot be re-included: the walk never enters that directory.)"""
    ignored = False
    for rule in rules:
        if rule.dir_only and not is_dir:
            continue
        if rule.regex.match(relpath):
            ignored = not rule.negated
    return ignored


# What a context leaves out before its `.detignore` is read (gitignore syntax). A notebook's
# context is usually its own directory, which also holds what working there leaves behind:
# checkpoints downloaded to Determined's default path (`checkpoints/<uuid>`, anchored: a package
# named `checkpoints` deeper down is code), JupyterLab's autosaves, bytecode caches, a git
# repository. A downloaded checkpoint alone can push a context over its size limit. The rules
# come first, so a `.detignore` line overrides them: `!checkpoints/` packs it again. (Here, not
# in a module of its own: this module is shipped by value to Ray nodes, importing only stdlib.)
DEFAULT_IGNORE: tuple[str, ...] = ("/checkpoints/", ".ipynb_checkpoints/", "__pycache__/", ".git/")


def _read_ignore(directory: pathlib.Path) -> list[IgnoreRule]:
    """The default rules (`DEFAULT_IGNORE`), then the directory's `.detignore`, which can
    override them (the last matching rule wins)."""
    lines = list(DEFAULT_IGNORE)
    path = directory / DETIGNORE
    if path.is_file():
        lines += path.read_text(encoding="utf-8", errors="replace").splitlines()
    return parse_ignore(lines)


# ---------------------------------------------------------------------------------------------
# pack


@dataclasses.dataclass(frozen=True)
class _Entry:
    arcname: str
    source: pathlib.Path  # the real file (symbolic links already followed)
    is_dir: bool
    size: int
    executable: bool


Warn = Callable[[str], None]


def _warn_on_stderr(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr, flush=True)


def _inside(path: pathlib.Path, root: pathlib.Path) -> bool:
    try:
        path.relative_to(root)
        return True
    except ValueError:
        return False


def _walk(
    directory: pathlib.Path,
    root: pathlib.Path,
    arc_prefix: str,
    rel_prefix: str,
    rules: Sequence[IgnoreRule],
    visiting: frozenset[pathlib.Path],
    warn: Warn,
) -> Iterator[_Entry]:
    """Entries below `directory` (in the context whose real path is `root`); `rel_prefix` is
    the path the ignore rules see.

    As Determined packs a context: a symbolic link is followed and its target's content packed
    (wherever it points; the archive holds no links). What cannot be packed (a broken or looping
    link, an unreadable file or directory, a socket, fifo or device) is skipped with a warning
    naming it, unless `.detignore` lists it. A link to a directory outside the context is packed
    as an empty directory, as Determined packs it."""
    try:
        children = sorted(os.scandir(directory), key=lambda d: d.name)
    except OSError as e:
        warn(f"cannot read the directory {arc_prefix.rstrip('/') or directory} ({e}); skipped")
        return
    for child in children:
        relpath = f"{rel_prefix}{child.name}"
        arcname = f"{arc_prefix}{child.name}"
        path = pathlib.Path(child.path)
        try:
            st = path.stat()  # follows links
        except (OSError, RuntimeError) as e:
            if not is_ignored(rules, relpath, False):
                kind = "symbolic link" if child.is_symlink() else "entry"
                warn(f"{kind} {arcname} is broken or unreadable ({e}); skipped")
            continue
        is_dir = stat.S_ISDIR(st.st_mode)
        if is_ignored(rules, relpath, is_dir):
            continue
        if is_dir:
            real = path.resolve()
            if real in visiting:
                warn(f"symbolic link {arcname} leads back into its own directory; skipped")
                continue
            yield _Entry(arcname, path, True, 0, True)
            if child.is_symlink() and not _inside(real, root):
                # As Determined (which follows no directory link): an empty directory. Walking
                # it could reach anything on the machine (a link to / or to $HOME).
                warn(
                    f"symbolic link {arcname} points to a directory outside the context "
                    f"({real}); packed empty (pass the directory with -i/--include instead)"
                )
                continue
            yield from _walk(
                path, root, arcname + "/", relpath + "/", rules, visiting | {real}, warn
            )
        elif not stat.S_ISREG(st.st_mode):
            warn(
                f"{arcname} is not a regular file or directory (a socket, fifo or device?); skipped"
            )
        elif not os.access(path, os.R_OK):
            warn(f"{arcname} cannot be read (permission denied); skipped")
        else:
            yield _Entry(arcname, path, False, st.st_size, bool(st.st_mode & 0o111))


def _collect(path: pathlib.Path, includes: Sequence, warn: Warn) -> list[_Entry]:
    entries: list[_Entry] = []
    if path.is_dir():
        real = path.resolve()
        entries.extend(_walk(path, real, "", "", _read_ignore(path), frozenset({real}), warn))
    elif path.is_file():
        st = path.stat()
        entries.append(_Entry(path.name, path, False, st.st_size, bool(st.st_mode & 0o111)))
    else:
        raise ContextError(f"context path {path} does not exist")
    # `-i PATH`: each include lands at the top level under its own name.
    for include in includes:
        inc = pathlib.Path(include)
        if not inc.exists():
            raise ContextError(f"included path {inc} does not exist")
        # The name as given (`-i data` -> `data/...`); `.` or `..` fall back to the real name.
        name = inc.name if inc.name not in ("", ".", "..") else inc.resolve().name
        if inc.is_dir():
            real = inc.resolve()
            entries.append(_Entry(name, inc, True, 0, True))
            entries.extend(
                _walk(inc, real, name + "/", "", _read_ignore(inc), frozenset({real}), warn)
            )
        else:
            st = inc.stat()
            entries.append(_Entry(name, inc, False, st.st_size, bool(st.st_mode & 0o111)))
    seen: dict[str, _Entry] = {}
    for entry in entries:
        if entry.arcname in seen and not (entry.is_dir and seen[entry.arcname].is_dir):
            raise ContextError(
                f"{entry.arcname} appears twice in the context (from {seen[entry.arcname].source} "
                f"and {entry.source}); rename one of the included paths"
            )
        seen[entry.arcname] = entry
    return sorted(seen.values(), key=lambda e: e.arcname)


def _human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def _ignore_line(arcname: str) -> str:
    """The `.detignore` line leaving out `arcname`'s top-level directory (or the file itself)."""
    head, sep, _ = arcname.partition("/")
    return f"/{head}/" if sep else f"/{head}"


def _too_large(
    path: pathlib.Path, entries: list[_Entry], total: int, limit: int
) -> ContextTooLarge:
    largest = sorted((e for e in entries if not e.is_dir), key=lambda e: (-e.size, e.arcname))[:5]
    listing = ", ".join(f"{e.arcname} ({_human(e.size)})" for e in largest)
    # The fix, concretely: the top-level entries that hold the largest files, as lines.
    suggested = list(dict.fromkeys(_ignore_line(e.arcname) for e in largest))
    where = path / DETIGNORE if path.is_dir() else DETIGNORE
    return ContextTooLarge(
        f"context {path} is {_human(total)}, over the {_human(limit)} limit; largest files: "
        f"{listing}; list what the trial does not need in {where} (e.g. "
        f"{', '.join(suggested)}), or pass a smaller context directory"
    )


def pack(
    path,
    *,
    includes: Sequence = (),
    limit_bytes: int = DEFAULT_LIMIT_BYTES,
    warn: Warn | None = None,
) -> bytes:
    """A deterministic tar.gz of `path`'s contents (or of the single file `path`) plus `includes`.

    Symbolic links are followed (their targets' content is packed); entries that cannot be
    packed are skipped, each with a warning: `warn(message)`, by default a `warning: ...` line
    on stderr. The limit applies to the content packed. Raises ContextError (ContextTooLarge
    over `limit_bytes`)."""
    warn = warn or _warn_on_stderr
    root = pathlib.Path(path)
    entries = _collect(root, includes, warn)
    total = sum(e.size for e in entries)
    if total > limit_bytes:
        raise _too_large(root, entries, total, limit_bytes)
    buffer = io.BytesIO()
    # filename="" and mtime=0 keep the gzip header free of anything that varies between runs.
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0) as gz:
        with tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
            packed = 0
            for entry in entries:
                info = tarfile.TarInfo(entry.arcname)
                info.mtime = 0
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                info.mode = 0o755 if entry.executable else 0o644
                if entry.is_dir:
                    info.type = tarfile.DIRTYPE
                    tar.addfile(info)
                    continue
                try:
                    data = entry.source.read_bytes()
                except OSError as e:  # gone or changed since the walk
                    warn(f"{entry.arcname} cannot be read ({e}); skipped")
                    continue
                packed += len(data)
                if packed > limit_bytes:  # it grew since the walk
                    raise _too_large(root, entries, packed, limit_bytes)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def content_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------------------------------------
# unpack


def _path_length_problem(name: str, what: str) -> str | None:
    """Why `name` (a member's path or a link's target) cannot be created, or None."""
    encoded = name.encode("utf-8", "surrogateescape")
    if len(encoded) > MAX_MEMBER_PATH_BYTES:
        return f"{what} is {len(encoded)} bytes long, over the limit of {MAX_MEMBER_PATH_BYTES}"
    for part in encoded.split(b"/"):
        if len(part) > MAX_MEMBER_NAME_BYTES:
            return (
                f"{what} has a component of {len(part)} bytes, over the limit of "
                f"{MAX_MEMBER_NAME_BYTES} (a file or directory name)"
            )
    return None


def _safe_member_path(name: str) -> str:
    """The normalised relative path of a member, or ContextError if it could leave the root
    or is too long to create."""
    problem = _path_length_problem(name, "its path")
    if problem:
        raise ContextError(f"archive member {name[:200]!r}: {problem}")
    if not name or name.startswith("/") or name.startswith("\\") or re.match(r"^[A-Za-z]:", name):
        raise ContextError(f"archive member {name!r} has an absolute path")
    parts = name.replace("\\", "/").split("/")
    if ".." in parts:
        raise ContextError(f"archive member {name!r} contains '..'")
    norm = posixpath.normpath(name)
    if norm in ("", "."):
        return "."
    return norm


def _link_destination(
    member: tarfile.TarInfo, start: list[str], target: str, links: set[str]
) -> str:
    """Walk `target` from the directory `start` component by component. Going above the root, or
    passing through another symbolic link of the archive (whose own target would change where
    `..` leads), is refused: a purely lexical check is only sound without links in the path."""
    kind = "symbolic" if member.issym() else "hard"
    problem = _path_length_problem(target, f"the target of this {kind} link")
    if problem:
        raise ContextError(f"archive member {member.name[:200]!r}: {problem}")
    if target.startswith("/"):
        raise ContextError(
            f"archive member {member.name!r} is a {kind} link to an absolute path {target!r}"
        )
    stack = list(start)
    for part in target.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not stack:
                raise ContextError(
                    f"archive member {member.name!r} is a {kind} link leaving the destination ({target!r})"
                )
            stack.pop()
            continue
        stack.append(part)
        if "/".join(stack) in links and member.issym():
            raise ContextError(
                f"archive member {member.name!r} is a symbolic link through another link ({target!r})"
            )
    return "/".join(stack)


def _validate(
    members: list[tarfile.TarInfo], limit_bytes: int
) -> list[tuple[tarfile.TarInfo, str]]:
    checked = []
    total = 0
    for member in members:
        relpath = _safe_member_path(member.name)
        if not (member.isreg() or member.isdir() or member.issym() or member.islnk()):
            raise ContextError(
                f"archive member {member.name!r} is a device, fifo or other special file"
            )
        total += member.size if member.isreg() else 0
        if total > limit_bytes:
            raise ContextTooLarge(
                f"archive unpacks to more than the {_human(limit_bytes)} limit (at member {member.name!r})"
            )
        checked.append((member, relpath))
    # Links are checked against the whole archive, so the order of members cannot matter.
    links = {rel for m, rel in checked if m.issym()}
    earlier_files: set[str] = set()  # a hard link must name a file extracted before it
    for member, relpath in checked:
        parent = relpath
        while "/" in parent:
            parent = parent.rsplit("/", 1)[0]
            if parent in links:
                raise ContextError(
                    f"archive member {member.name!r} is written through the symbolic link {parent!r}"
                )
        if member.issym():
            start = relpath.split("/")[:-1]
            _link_destination(member, start, member.linkname, links)
        elif member.islnk():
            resolved = _link_destination(member, [], member.linkname, links)
            if resolved not in earlier_files:
                raise ContextError(
                    f"archive member {member.name!r} is a hard link to {member.linkname!r}, "
                    "which is not a regular file earlier in the archive"
                )
        if member.isreg():
            earlier_files.add(relpath)
    return checked


def unpack(data: bytes, dest, *, limit_bytes: int = DEFAULT_LIMIT_BYTES) -> None:
    """Validate every member of the tar(.gz) `data`, then extract into `dest` (created if needed)."""
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
            members = tar.getmembers()
            checked = _validate(members, limit_bytes)
            dest_path = pathlib.Path(dest)
            dest_path.mkdir(parents=True, exist_ok=True)
            for member, relpath in checked:
                target = dest_path / relpath
                if member.isdir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                if target.is_symlink() or target.exists():
                    if target.is_dir() and not target.is_symlink():
                        raise ContextError(
                            f"archive member {member.name!r} collides with a directory"
                        )
                    target.unlink()
                if member.issym():
                    os.symlink(member.linkname, target)
                elif member.islnk():
                    os.link(dest_path / posixpath.normpath(member.linkname), target)
                else:
                    source = tar.extractfile(member)
                    assert source is not None
                    with open(target, "wb") as out:
                        while chunk := source.read(1 << 20):
                            out.write(chunk)
                    os.chmod(target, 0o755 if member.mode & 0o111 else 0o644)
    except (tarfile.TarError, EOFError, gzip.BadGzipFile, zlib.error) as e:
        raise ContextError(f"context archive is not a valid tar.gz: {e}") from e


# ---------------------------------------------------------------------------------------------
# in a child process

# What the master runs for a large context: `python -c CHILD_PROGRAM check LIMIT TARBALL` (unpack
# into a scratch directory, removed again) or `... unpack LIMIT TARBALL DEST` (DEST made afresh).
# Its own interpreter: the work (one syscall and some Python per member, 100k members in
# a context of 1 MiB) does not share the master's GIL, so the master's loop keeps answering.
CHILD_PROGRAM = "from determined.common.context import child_main; raise SystemExit(child_main())"
CHILD_TOO_LARGE = 2  # exit status: ContextTooLarge (the message on stderr)
CHILD_INVALID = 1  # exit status: ContextError


def child_main(argv: Sequence[str] | None = None) -> int:
    """The child's side of CHILD_PROGRAM; its exit status (0, CHILD_INVALID, CHILD_TOO_LARGE)."""
    import shutil
    import sys
    import tempfile

    mode, limit, tarball, *rest = sys.argv[1:] if argv is None else argv
    try:
        data = pathlib.Path(tarball).read_bytes()
        if mode == "check":
            with tempfile.TemporaryDirectory(prefix="context-check-") as scratch:
                unpack(data, scratch, limit_bytes=int(limit))
        else:
            dest = pathlib.Path(rest[0])
            if dest.exists():  # left by a master that crashed before recording the run
                shutil.rmtree(dest)
            dest.mkdir(parents=True)
            unpack(data, dest, limit_bytes=int(limit))
    except ContextTooLarge as exc:
        print(exc, file=sys.stderr)
        return CHILD_TOO_LARGE
    except (ContextError, OSError) as exc:
        print(exc, file=sys.stderr)
        return CHILD_INVALID
    return 0
