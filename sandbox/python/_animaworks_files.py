"""The Anima's own files for Python tools: `open`, `pathlib` and `os` on paths under `anima_dir`.

The interpreter has no file system of the host's. A path under the folder the host passed as
`anima_dir` (in the call's arguments) is served by the host's file capability, relative to that folder;
every other path stays on the interpreter's own in-memory file system. The host decides what a relative
path reaches (the Anima's folder only, no links out, its quotas), whatever this module says: this is a
convenience of naming, not a boundary.

Covered: open() for reading (whole file) and writing/appending (sent when closed), os.stat / os.lstat,
os.path.exists / isfile / isdir, os.listdir / os.scandir (names), os.mkdir / os.makedirs, os.remove /
os.unlink / os.rmdir, os.rename / os.replace — and so pathlib's read_text/write_text/read_bytes/
write_bytes/exists/is_file/is_dir/iterdir/mkdir/unlink/rename, which are built on them.
"""

from __future__ import annotations

import builtins
import io
import json
import os
import posixpath
import stat as stat_module

import _animaworks_host

#: The Anima's folder as the current call's arguments named it, or None outside such a call.
anima_dir: str | None = None

_open = builtins.open
_stat = os.stat
_lstat = os.lstat
_listdir = os.listdir
_scandir = os.scandir
_mkdir = os.mkdir
_remove = os.remove
_rmdir = os.rmdir
_rename = os.rename
_replace = os.replace


def _relative(path: object) -> str | None:
    """The path relative to the Anima's folder, when it names something inside it."""
    if anima_dir is None or isinstance(path, int):
        return None
    try:
        text = os.fsdecode(os.fspath(path))  # type: ignore[arg-type]
    except TypeError:
        return None
    full = posixpath.normpath(text if posixpath.isabs(text) else posixpath.join(os.getcwd(), text))
    root = posixpath.normpath(anima_dir)
    if full == root:
        return "."
    if full.startswith(root + "/"):
        return full[len(root) + 1 :]
    return None


def _host(promise: object) -> object:
    from _animaworks_runtime import HostError, wait

    try:
        return wait(promise)
    except HostError as error:
        message = str(error)
        if error.type == "NotFound":
            raised: OSError = FileNotFoundError(2, message)
        elif error.type in ("SandboxViolation", "PermissionDenied"):
            raised = PermissionError(13, message)
        else:
            raised = OSError(message)
        raised._js_error = error._js_error  # type: ignore[attr-defined]
        raise raised from None


class _HostWriter(io.BytesIO):
    """Bytes written to a file of the Anima's, sent to the host when closed."""

    def __init__(self, relative: str, append: bool, initial: bytes = b"") -> None:
        super().__init__(initial)
        self.seek(0, io.SEEK_END)
        self._relative = relative
        self._append = append
        self._sent = False

    def close(self) -> None:
        if not self._sent and not self.closed:
            self._sent = True
            from pyodide.ffi import to_js

            _host(_animaworks_host.fs_write(self._relative, to_js(self.getvalue()), self._append))
        super().close()


def _host_open(file, mode="r", buffering=-1, encoding=None, errors=None, newline=None, closefd=True, opener=None):  # noqa: ANN001, ANN202
    relative = _relative(file)
    if relative is None:
        return _open(file, mode, buffering, encoding, errors, newline, closefd, opener)
    binary = "b" in mode
    if "+" in mode:
        raise OSError(f"open(): mode {mode!r} is not supported for the Anima's files; read, write or append")
    if "r" in mode:
        raw: io.BufferedIOBase = io.BytesIO(bytes(_host(_animaworks_host.fs_read(relative)).to_bytes()))  # type: ignore[attr-defined]
    elif "x" in mode and _exists(relative):
        raise FileExistsError(17, f"File exists: {file!r}")
    else:
        raw = _HostWriter(relative, append="a" in mode)
    if binary:
        return raw
    return io.TextIOWrapper(raw, encoding=encoding or "utf-8", errors=errors, newline=newline)  # type: ignore[arg-type]


def _exists(relative: str) -> bool:
    return bool(_host(_animaworks_host.fs_exists(relative)))


def _host_stat(path, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
    relative = _relative(path)
    if relative is None:
        return _stat(path, *args, **kwargs)
    info = json.loads(str(_host(_animaworks_host.fs_stat(relative))))
    kind = {"file": stat_module.S_IFREG, "directory": stat_module.S_IFDIR, "symlink": stat_module.S_IFLNK}.get(info.get("type"), 0)
    mtime = float(info.get("mtimeMs", 0)) / 1000
    return os.stat_result((kind | 0o644, 0, 0, 1, 0, 0, int(info.get("size", 0)), mtime, mtime, mtime))


def _host_listdir(path="."):  # noqa: ANN001, ANN202
    relative = _relative(path)
    if relative is None:
        return _listdir(path)
    return [entry["name"] for entry in json.loads(str(_host(_animaworks_host.fs_readdir(relative))))]


class _Entry:
    """What os.scandir yields for a file of the Anima's (the parts pathlib and most code use)."""

    def __init__(self, directory: object, name: str, kind: str) -> None:
        self.name = name
        self.path = posixpath.join(os.fsdecode(os.fspath(directory)), name)  # type: ignore[arg-type]
        self._kind = kind

    def is_dir(self, *, follow_symlinks: bool = True) -> bool:
        return self._kind == "directory"

    def is_file(self, *, follow_symlinks: bool = True) -> bool:
        return self._kind == "file"

    def is_symlink(self) -> bool:
        return self._kind == "symlink"

    def stat(self, *, follow_symlinks: bool = True) -> os.stat_result:
        return _host_stat(self.path)

    def __fspath__(self) -> str:
        return self.path


class _Entries:
    """An os.scandir iterator over entries listed by the host (a context manager, as scandir's is)."""

    def __init__(self, entries: list[_Entry]) -> None:
        self._entries = iter(entries)

    def __iter__(self) -> _Entries:
        return self

    def __next__(self) -> _Entry:
        return next(self._entries)

    def __enter__(self) -> _Entries:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def close(self) -> None:
        pass


def _host_scandir(path="."):  # noqa: ANN001, ANN202
    relative = _relative(path)
    if relative is None:
        return _scandir(path)
    listed = json.loads(str(_host(_animaworks_host.fs_readdir(relative))))
    return _Entries([_Entry(path, entry["name"], entry["type"]) for entry in listed])


def _host_mkdir(path, mode=0o777, *, dir_fd=None):  # noqa: ANN001, ANN202
    relative = _relative(path)
    if relative is None:
        return _mkdir(path, mode, dir_fd=dir_fd)
    if _exists(relative):
        raise FileExistsError(17, f"File exists: {os.fspath(path)!r}")
    _host(_animaworks_host.fs_mkdir(relative, False))
    return None


def _host_removal(own):  # noqa: ANN001, ANN202
    """os.remove or os.rmdir: under the Anima's folder the host's non-recursive removal, else `own`."""

    def remove(path, *, dir_fd=None):  # noqa: ANN001, ANN202
        relative = _relative(path)
        if relative is None:
            return own(path, dir_fd=dir_fd)
        _host(_animaworks_host.fs_rm(relative, False))
        return None

    return remove


_host_remove = _host_removal(_remove)
_host_rmdir = _host_removal(_rmdir)


def _host_rename(src, dst, *, src_dir_fd=None, dst_dir_fd=None):  # noqa: ANN001, ANN202
    source, target = _relative(src), _relative(dst)
    if source is None and target is None:
        return _rename(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)
    if source is None or target is None:
        raise OSError("a file cannot move between the Anima's folder and the interpreter's own files")
    _host(_animaworks_host.fs_rename(source, target))
    return None


def install() -> None:
    builtins.open = _host_open
    io.open = _host_open
    os.stat = _host_stat
    os.lstat = _host_stat
    os.listdir = _host_listdir
    os.scandir = _host_scandir
    os.mkdir = _host_mkdir
    os.remove = _host_remove
    os.unlink = _host_remove
    os.rmdir = _host_rmdir
    os.rename = _host_rename
    os.replace = _host_rename
