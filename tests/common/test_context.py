"""pack/unpack of context tarballs: .detignore, determinism, limits, and unsafe archives."""

from __future__ import annotations

import io
import os
import pathlib
import tarfile
import time

import pytest

from determined.common import context
from tests._support import tar_gz


def write(root: pathlib.Path, rel: str, text: str = "x") -> pathlib.Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def names(data: bytes) -> list[str]:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        return [m.name for m in tar.getmembers() if not m.isdir()]


def member(name: str, kind: bytes = tarfile.REGTYPE, linkname: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    return info


# ---- .detignore ---------------------------------------------------------------------------


def test_detignore_globs_dirs_negation_anchoring_and_comments(tmp_path):
    write(
        tmp_path,
        ".detignore",
        "\n".join(
            [
                "# comment line",
                "*.log",
                "!keep.log",
                "data/",
                "/top.txt",
                "**/cache/**",
                "build",
                "",
            ]
        ),
    )
    for rel in [
        "train.py",
        "a.log",
        "keep.log",
        "sub/b.log",
        "sub/keep.log",
        "data/big.bin",
        "sub/data/also.bin",
        "top.txt",
        "sub/top.txt",
        "x/cache/y/z.bin",
        "build/out.o",
        "sub/build",
        "# comment line",
    ]:
        write(tmp_path, rel)

    packed = names(context.pack(tmp_path))

    assert packed == sorted(
        [
            ".detignore",
            "# comment line",
            "keep.log",
            "sub/keep.log",
            "sub/top.txt",
            "train.py",
        ]
    )


def test_detignore_dir_only_pattern_keeps_files_of_that_name(tmp_path):
    write(tmp_path, ".detignore", "out/\n")
    write(tmp_path, "out/a.txt")
    write(tmp_path, "sub/out", "a file named out")
    assert names(context.pack(tmp_path)) == [".detignore", "sub/out"]


def test_is_ignored_last_rule_wins():
    rules = context.parse_ignore(["*.csv", "!important.csv", "important.csv"])
    assert context.is_ignored(rules, "important.csv", False)
    assert context.is_ignored(rules, "a/b.csv", False)
    assert not context.is_ignored(rules, "a/b.txt", False)


def test_double_star_in_the_middle_matches_zero_or_more_dirs():
    rules = context.parse_ignore(["a/**/z.txt"])
    assert context.is_ignored(rules, "a/z.txt", False)
    assert context.is_ignored(rules, "a/b/c/z.txt", False)
    assert not context.is_ignored(rules, "b/a/z.txt", False)


# ---- determinism and contents ---------------------------------------------------------------


def test_pack_is_deterministic_across_mtimes_and_order(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    for root, order in [(one, ["b.py", "a/c.py", "a/d.py"]), (two, ["a/d.py", "b.py", "a/c.py"])]:
        for rel in order:
            write(root, rel, f"content of {rel}")
    os.utime(one / "b.py", (time.time() - 10_000, time.time() - 10_000))
    (one / "b.py").chmod(0o600)
    (two / "b.py").chmod(0o664)

    first, second = context.pack(one), context.pack(two)

    assert first == second
    assert context.content_hash(first) == context.content_hash(second)
    assert len(context.content_hash(first)) == 64


def test_pack_normalises_metadata_and_keeps_exec_bit(tmp_path):
    write(tmp_path, "run.sh", "#!/bin/sh\n").chmod(0o700)
    write(tmp_path, "lib/m.py").chmod(0o600)
    with tarfile.open(fileobj=io.BytesIO(context.pack(tmp_path)), mode="r:gz") as tar:
        modes = {m.name: (m.mode, m.mtime, m.uid, m.gid) for m in tar.getmembers()}
    assert modes == {
        "lib": (0o755, 0, 0, 0),
        "lib/m.py": (0o644, 0, 0, 0),
        "run.sh": (0o755, 0, 0, 0),
    }


def test_round_trip_and_includes_land_at_top_level(tmp_path):
    src = tmp_path / "src"
    write(src, "train.py", "print('hi')")
    write(src, "pkg/util.py", "X = 1")
    extra_file = write(tmp_path / "elsewhere", "extra.csv", "1,2")
    extra_dir = tmp_path / "shared_lib"
    write(extra_dir, "helpers.py", "Y = 2")
    dest = tmp_path / "dest"

    context.unpack(context.pack(src, includes=[extra_file, extra_dir]), dest)

    got = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    assert got == ["extra.csv", "pkg/util.py", "shared_lib/helpers.py", "train.py"]
    assert (dest / "train.py").read_text() == "print('hi')"


def test_pack_single_file(tmp_path):
    path = write(tmp_path, "model.py", "M")
    assert names(context.pack(path)) == ["model.py"]


def test_include_name_collision_is_an_error(tmp_path):
    write(tmp_path / "src", "data.csv")
    other = write(tmp_path / "other", "data.csv")
    with pytest.raises(context.ContextError, match="data.csv appears twice"):
        context.pack(tmp_path / "src", includes=[other])


def test_symlinks_inside_and_outside_are_stored_as_content(tmp_path):
    src = tmp_path / "src"
    write(src, "real.txt", "real")
    (src / "alias.txt").symlink_to("real.txt")
    with tarfile.open(fileobj=io.BytesIO(context.pack(src)), mode="r:gz") as tar:
        alias = tar.getmember("alias.txt")
        assert alias.isreg()
        assert tar.extractfile(alias).read() == b"real"

    # As Determined packs a context: a link to a file outside is followed too.
    outside = write(tmp_path, "shared.txt", "s")
    (src / "shared.txt").symlink_to(outside)
    with tarfile.open(fileobj=io.BytesIO(context.pack(src)), mode="r:gz") as tar:
        assert tar.extractfile("shared.txt").read() == b"s"


# ---- size limit ----------------------------------------------------------------------------


def test_too_large_names_size_limit_largest_files_and_detignore(tmp_path):
    for i in range(7):
        write(tmp_path, f"f{i}.bin", "x" * (1000 * (i + 1)))
    with pytest.raises(context.ContextTooLarge) as info:
        context.pack(tmp_path, limit_bytes=10_000)
    message = str(info.value)
    assert "27.3 KB" in message and "9.8 KB limit" in message
    for big in ["f6.bin", "f5.bin", "f4.bin", "f3.bin", "f2.bin"]:
        assert big in message
    assert "f0.bin" not in message and "f1.bin" not in message
    assert ".detignore" in message


def test_detignored_files_do_not_count_toward_the_limit(tmp_path):
    write(tmp_path, "huge.bin", "x" * 50_000)
    write(tmp_path, ".detignore", "*.bin\n")
    context.pack(tmp_path, limit_bytes=10_000)


# ---- unsafe archives -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad, fragment",
    [
        (member("../evil.txt"), "'..'"),
        (member("a/../../evil.txt"), "'..'"),
        (member("/etc/evil.txt"), "absolute"),
        (member("link", tarfile.SYMTYPE, "../../outside"), "leaving the destination"),
        (member("link", tarfile.SYMTYPE, "/etc/passwd"), "absolute"),
        (member("hard", tarfile.LNKTYPE, "../outside"), "leaving the destination"),
        (member("dev", tarfile.CHRTYPE), "device"),
        (member("fifo", tarfile.FIFOTYPE), "device, fifo"),
    ],
)
def test_unsafe_member_is_refused_and_dest_untouched(tmp_path, bad, fragment):
    # The good member comes first: validation must happen before anything is written.
    data = tar_gz({}, members=[(member("good.txt"), b"fine"), (bad, b"x" if bad.isreg() else None)])
    dest = tmp_path / "dest"
    with pytest.raises(context.ContextError, match=fragment) as info:
        context.unpack(data, dest)
    assert repr(bad.name) in str(info.value)
    assert not dest.exists()
    assert not (tmp_path / "evil.txt").exists()


def test_write_through_symlink_is_refused(tmp_path):
    data = tar_gz(
        {}, members=[(member("d", tarfile.SYMTYPE, "sub"), None), (member("d/x.txt"), b"x")]
    )
    with pytest.raises(context.ContextError, match="through the symbolic link"):
        context.unpack(data, tmp_path / "dest")


def test_zip_bomb_guard_checks_total_before_writing(tmp_path):
    data = tar_gz({}, members=[(member("a.bin"), b"\0" * 6000), (member("b.bin"), b"\0" * 6000)])
    dest = tmp_path / "dest"
    with pytest.raises(context.ContextTooLarge, match="b.bin"):
        context.unpack(data, dest, limit_bytes=10_000)
    assert not dest.exists()


def test_symlink_inside_dest_is_allowed(tmp_path):
    data = tar_gz(
        {},
        members=[
            (member("real.txt"), b"r"),
            (member("sub/link", tarfile.SYMTYPE, "../real.txt"), None),
        ],
    )
    context.unpack(data, tmp_path / "dest")
    assert (tmp_path / "dest" / "sub" / "link").read_text() == "r"


def test_garbage_is_a_context_error(tmp_path):
    with pytest.raises(context.ContextError, match="not a valid tar.gz"):
        context.unpack(b"definitely not a tarball", tmp_path / "dest")


def test_symlink_chain_escape_is_refused_whatever_the_member_order(tmp_path):
    # "b" looks harmless lexically ("a/a/a/../.." is "a"), but with a -> "." it is dest/../..
    escape = (member("b", tarfile.SYMTYPE, "a/a/a/../../../x"), None)
    loop = (member("a", tarfile.SYMTYPE, "."), None)
    for order in [(escape, loop), (loop, escape)]:
        dest = tmp_path / f"dest{id(order)}"
        with pytest.raises(context.ContextError, match="'b'.*(through another link|leaving)"):
            context.unpack(tar_gz({}, members=order), dest)
        assert not dest.exists()


def test_hard_link_inside_round_trips_and_dangling_one_is_refused(tmp_path):
    good = tar_gz(
        {},
        members=[
            (member("data.txt"), b"payload"),
            (member("copy.txt", tarfile.LNKTYPE, "data.txt"), None),
        ],
    )
    context.unpack(good, tmp_path / "ok")
    assert (tmp_path / "ok" / "copy.txt").read_bytes() == b"payload"

    dangling = tar_gz(
        {},
        members=[
            (member("copy.txt", tarfile.LNKTYPE, "later.txt"), None),
            (member("later.txt"), b"x"),
        ],
    )
    with pytest.raises(context.ContextError, match="'copy.txt' is a hard link"):
        context.unpack(dangling, tmp_path / "bad")
    assert not (tmp_path / "bad").exists()


# ---- default ignore list -------------------------------------------------------------------


def _names(data: bytes) -> set[str]:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        return {m.name for m in tar.getmembers()}


def test_default_ignore_leaves_out_downloads_autosaves_caches_and_git(tmp_path):
    write(tmp_path, "train.py", "print(1)")
    write(tmp_path, "checkpoints/u-1/state.pt", "x")
    write(tmp_path, ".ipynb_checkpoints/nb-checkpoint.ipynb", "{}")
    write(tmp_path, "pkg/__pycache__/m.cpython-311.pyc", "x")
    write(tmp_path, ".git/HEAD", "ref")
    write(tmp_path, "pkg/checkpoints/__init__.py", "")  # a package of that name is code
    names = _names(context.pack(tmp_path))
    assert "train.py" in names and "pkg/checkpoints/__init__.py" in names
    for left_out in ["checkpoints", ".ipynb_checkpoints", "pkg/__pycache__", ".git"]:
        assert left_out not in names
        assert not any(name.startswith(left_out + "/") for name in names)


def test_detignore_negation_packs_a_default_ignored_directory_again(tmp_path):
    write(tmp_path, "checkpoints/u-1/state.pt", "x")
    write(tmp_path, ".detignore", "!checkpoints/\n")
    assert "checkpoints/u-1/state.pt" in _names(context.pack(tmp_path))


def test_a_downloaded_checkpoint_does_not_count_toward_the_limit(tmp_path):
    write(tmp_path, "train.py", "print(1)")
    write(tmp_path, "checkpoints/u-1/state.pt", "x" * 50_000)
    context.pack(tmp_path, limit_bytes=10_000)  # no ContextTooLarge


def test_too_large_message_is_one_line_with_the_lines_to_add(tmp_path):
    write(tmp_path, "data/big.bin", "x" * 20_000)
    write(tmp_path, "weights.h5", "x" * 15_000)
    with pytest.raises(context.ContextTooLarge) as info:
        context.pack(tmp_path, limit_bytes=10_000)
    message = str(info.value)
    assert "\n" not in message
    assert "data/big.bin" in message and "weights.h5" in message
    assert "/data/, /weights.h5" in message and str(tmp_path / ".detignore") in message
