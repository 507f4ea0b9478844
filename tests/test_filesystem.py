"""The in-memory filesystem: paths, files, directories, caps and clones."""

from __future__ import annotations

import pytest

from fake_server.filesystem import FileSystem, FsError, programs


@pytest.fixture
def fs() -> FileSystem:
    return FileSystem()


def errno_of(exc_info: pytest.ExceptionInfo[FsError]) -> str:
    return exc_info.value.errno_name


# -- normalize ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "cwd", "expected"),
    [
        ("/a/b", "/", "/a/b"),
        ("b", "/a", "/a/b"),
        ("//a///b//", "/", "/a/b"),
        ("./a/./b/.", "/", "/a/b"),
        ("a/../b", "/root", "/root/b"),
        ("..", "/root", "/"),
        ("../../../..", "/root", "/"),
        ("/../../etc/passwd", "/", "/etc/passwd"),
        ("../../x", "/a/b/c", "/a/x"),
        (".", "/tmp", "/tmp"),
        ("/", "/tmp", "/"),
    ],
)
def test_normalize(path: str, cwd: str, expected: str) -> None:
    assert FileSystem.normalize(path, cwd) == expected


@pytest.mark.parametrize("path", ["", "/tmp/a\0b", "\0"])
def test_normalize_rejects_empty_and_nul(path: str) -> None:
    with pytest.raises(FsError) as exc_info:
        FileSystem.normalize(path)
    assert errno_of(exc_info) == "EINVAL"
    assert str(exc_info.value) == "Invalid argument"


def test_nul_is_rejected_by_every_operation(fs: FileSystem) -> None:
    with pytest.raises(FsError, match="Invalid argument"):
        fs.write("/tmp/a\0", b"x")
    with pytest.raises(FsError, match="Invalid argument"):
        fs.exists("/tmp\0")


# -- defaults and files -------------------------------------------------------------------------


#: What a new filesystem already holds: the image's configuration files.
IMAGE_BYTES = FileSystem().total_bytes


def test_new_filesystem_looks_like_a_linux_image(fs: FileSystem) -> None:
    # A stock Ubuntu root, less the kernel's (/proc, /sys) and the library links (/lib...).
    assert fs.listdir("/") == [
        *("bin", "boot", "dev", "etc", "home", "media", "mnt", "opt", "root", "run", "sbin"),
        *("srv", "tmp", "usr", "var"),
    ]
    for directory in ("/var/log", "/var/tmp", "/var/cache", "/var/lib", "/usr/local/bin"):
        assert fs.is_dir(directory), directory
    assert fs.listdir("/opt") == fs.listdir("/srv") == fs.listdir("/mnt") == []
    assert fs.is_dir("/")
    assert fs.is_dir("/tmp")
    assert fs.is_dir("/root")
    assert b"ID=ubuntu" in fs.read("/etc/os-release")
    assert fs.read("/etc/passwd").startswith(b"root:x:0:0:root:/root:/bin/bash\n")
    assert 0 < IMAGE_BYTES < 2048


def test_write_read_roundtrip_is_byte_exact(fs: FileSystem) -> None:
    data = bytes(range(256))
    fs.write("/tmp/bin", data)
    assert fs.read("/tmp/bin") == data
    assert fs.is_file("/tmp/bin")
    assert not fs.is_dir("/tmp/bin")
    assert fs.exists("/tmp/bin")


def test_write_replaces_and_appends(fs: FileSystem) -> None:
    fs.write("/tmp/f", b"one")
    fs.write("/tmp/f", b"two")
    fs.write("/tmp/f", b"+", append=True)
    assert fs.read("/tmp/f") == b"two+"
    fs.write("/tmp/new", b"x", append=True)
    assert fs.read("/tmp/new") == b"x"


def test_write_needs_an_existing_parent_unless_make_parents(fs: FileSystem) -> None:
    with pytest.raises(FsError) as exc_info:
        fs.write("/a/b/c", b"x")
    assert errno_of(exc_info) == "ENOENT"
    assert exc_info.value.path == "/a/b"
    fs.write("/a/b/c", b"x", make_parents=True)
    assert fs.is_dir("/a")
    assert fs.is_dir("/a/b")
    assert fs.read("/a/b/c") == b"x"


@pytest.mark.parametrize("make_parents", [False, True])
def test_write_through_a_file_is_enotdir(fs: FileSystem, make_parents: bool) -> None:
    fs.write("/tmp/f", b"")
    with pytest.raises(FsError) as exc_info:
        fs.write("/tmp/f/g", b"x", make_parents=make_parents)
    assert errno_of(exc_info) == "ENOTDIR"


def test_write_to_a_directory_is_eisdir(fs: FileSystem) -> None:
    with pytest.raises(FsError) as exc_info:
        fs.write("/tmp", b"x")
    assert errno_of(exc_info) == "EISDIR"
    assert str(exc_info.value) == "Is a directory"


def test_read_errors(fs: FileSystem) -> None:
    with pytest.raises(FsError) as missing:
        fs.read("/tmp/nope")
    assert (errno_of(missing), missing.value.path, str(missing.value)) == (
        "ENOENT",
        "/tmp/nope",
        "No such file or directory",
    )
    with pytest.raises(FsError) as directory:
        fs.read("/root")
    assert errno_of(directory) == "EISDIR"
    fs.write("/tmp/f", b"")
    with pytest.raises(FsError) as through_file:
        fs.read("/tmp/f/x")
    assert errno_of(through_file) == "ENOTDIR"


# -- directories --------------------------------------------------------------------------------


def test_mkdir(fs: FileSystem) -> None:
    fs.mkdir("/srv/app")
    assert fs.is_dir("/srv/app")
    with pytest.raises(FsError) as exists:
        fs.mkdir("/srv/app")
    assert errno_of(exists) == "EEXIST"
    fs.mkdir("/srv/app", parents=True)  # -p tolerates an existing directory
    with pytest.raises(FsError) as missing_parent:
        fs.mkdir("/x/y")
    assert errno_of(missing_parent) == "ENOENT"
    fs.mkdir("/x/y/z", parents=True)
    assert fs.listdir("/x/y") == ["z"]


def test_mkdir_over_or_through_a_file(fs: FileSystem) -> None:
    fs.write("/tmp/f", b"")
    with pytest.raises(FsError) as over:
        fs.mkdir("/tmp/f", parents=True)
    assert errno_of(over) == "EEXIST"
    with pytest.raises(FsError) as through:
        fs.mkdir("/tmp/f/sub", parents=True)
    assert errno_of(through) == "ENOTDIR"


def test_listdir_is_sorted_and_direct_children_only(fs: FileSystem) -> None:
    fs.write("/tmp/b", b"")
    fs.write("/tmp/a", b"")
    fs.write("/tmp/d/deep", b"", make_parents=True)
    assert fs.listdir("/tmp") == ["a", "b", "d"]
    assert fs.listdir("/tmp/d") == ["deep"]
    with pytest.raises(FsError) as missing:
        fs.listdir("/nope")
    assert errno_of(missing) == "ENOENT"
    with pytest.raises(FsError) as not_dir:
        fs.listdir("/tmp/a")
    assert errno_of(not_dir) == "ENOTDIR"


# -- remove and rename --------------------------------------------------------------------------


def test_remove_file_and_missing(fs: FileSystem) -> None:
    fs.write("/tmp/f", b"abc")
    fs.remove("/tmp/f")
    assert not fs.exists("/tmp/f")
    assert fs.total_bytes == IMAGE_BYTES
    with pytest.raises(FsError) as missing:
        fs.remove("/tmp/f")
    assert errno_of(missing) == "ENOENT"
    fs.remove("/tmp/f", force=True)


def test_remove_directory_needs_recursive(fs: FileSystem) -> None:
    fs.write("/tmp/d/e/f", b"12", make_parents=True)
    fs.write("/tmp/dx", b"3")  # a sibling sharing the prefix survives
    with pytest.raises(FsError) as not_recursive:
        fs.remove("/tmp/d")
    assert errno_of(not_recursive) == "EISDIR"
    fs.remove("/tmp/d", recursive=True)
    assert fs.listdir("/tmp") == ["dx"]
    assert fs.total_bytes == IMAGE_BYTES + 1


def test_remove_root_is_refused(fs: FileSystem) -> None:
    with pytest.raises(FsError) as exc_info:
        fs.remove("/", recursive=True, force=True)
    assert errno_of(exc_info) == "EINVAL"
    assert fs.is_dir("/tmp")


def test_rename_file_and_directory(fs: FileSystem) -> None:
    fs.write("/tmp/a", b"x")
    fs.write("/root/b", b"long")
    fs.rename("/tmp/a", "/root/b")  # replaces the destination file
    assert fs.read("/root/b") == b"x"
    assert not fs.exists("/tmp/a")
    assert fs.total_bytes == IMAGE_BYTES + 1
    fs.write("/tmp/d/sub/f", b"y", make_parents=True)
    fs.rename("/tmp/d", "/srv")
    assert fs.read("/srv/sub/f") == b"y"
    assert not fs.exists("/tmp/d/sub")
    fs.rename("/srv", "/srv")


@pytest.mark.parametrize(
    ("source", "destination", "errno_name"),
    [
        ("/nope", "/tmp/x", "ENOENT"),
        ("/tmp/d", "/tmp/d/inner", "EINVAL"),
        ("/tmp/d", "/tmp/file", "ENOTDIR"),
        ("/tmp/d", "/tmp/full", "ENOTEMPTY"),
        ("/tmp/file", "/tmp/full", "EISDIR"),
        ("/tmp/file", "/missing/x", "ENOENT"),
    ],
)
def test_rename_errors(fs: FileSystem, source: str, destination: str, errno_name: str) -> None:
    fs.mkdir("/tmp/d")
    fs.write("/tmp/file", b"")
    fs.write("/tmp/full/x", b"", make_parents=True)
    with pytest.raises(FsError) as exc_info:
        fs.rename(source, destination)
    assert errno_of(exc_info) == errno_name


# -- caps, accounting and clones ----------------------------------------------------------------


def test_max_file_bytes(fs: FileSystem) -> None:
    capped = FileSystem(max_file_bytes=4)
    capped.write("/tmp/f", b"1234")
    with pytest.raises(FsError) as exc_info:
        capped.write("/tmp/f", b"5", append=True)
    assert errno_of(exc_info) == "EFBIG"
    assert str(exc_info.value) == "File too large"
    assert capped.read("/tmp/f") == b"1234"  # a refused write changes nothing


def test_max_total_bytes_counts_replacements_and_removals() -> None:
    capped = FileSystem(max_total_bytes=IMAGE_BYTES + 5)
    capped.write("/tmp/a", b"123")
    capped.write("/tmp/a", b"12345")  # replacing frees the old bytes first
    with pytest.raises(FsError) as exc_info:
        capped.write("/tmp/b", b"x")
    assert errno_of(exc_info) == "EFBIG"
    assert not capped.exists("/tmp/b")
    capped.remove("/tmp/a")
    capped.write("/tmp/b", b"x")
    assert capped.total_bytes == IMAGE_BYTES + 1


def test_clone_is_independent_and_keeps_caps() -> None:
    original = FileSystem(max_file_bytes=3)
    original.write("/tmp/f", b"abc")
    copy = original.clone()
    copy.write("/tmp/f", b"z")
    copy.mkdir("/srv/app")
    original.remove("/tmp/f")
    assert copy.read("/tmp/f") == b"z"
    assert copy.is_dir("/srv/app")
    assert not original.exists("/tmp/f")
    assert not original.exists("/srv/app")
    assert (original.total_bytes, copy.total_bytes) == (IMAGE_BYTES, IMAGE_BYTES + 1)
    with pytest.raises(FsError, match="File too large"):
        copy.write("/tmp/g", b"long")


def test_modes_are_the_images_and_a_clone_keeps_them() -> None:
    original = FileSystem()

    def mode(tree: FileSystem, path: str) -> int:
        return int(tree.native.stat(path)["mode"])

    assert [mode(original, d) for d in ("/tmp", "/var/tmp", "/run/lock")] == [0o1777] * 3
    assert mode(original, "/opt") == 0o755
    # Changed from what a new tree has (either way): the copy has them as changed.
    original.native.chmod("/tmp", 0o755)
    original.native.chmod("/opt", 0o700)
    original.write("/opt/key", b"k")
    original.native.chmod("/opt/key", 0o600)
    copy = original.clone()
    assert [mode(copy, p) for p in ("/tmp", "/opt", "/opt/key")] == [0o755, 0o700, 0o600]
    assert mode(copy, "/var/tmp") == 0o1777


def test_a_new_filesystem_is_small() -> None:
    # Thousands of idle sandboxes each hold one: no per-instance __dict__ or preallocation.
    assert not hasattr(FileSystem(), "__dict__")


def test_the_program_directory_holds_programs_only() -> None:
    # A new bashkit tree's /dev, /home and /tmp showed in `ls /bin` and `ls /usr/bin`.
    kinds = {entry["metadata"]["file_type"] for entry in programs().read_dir("/")}
    assert kinds == {"file"}
    assert programs().exists("/cat")
