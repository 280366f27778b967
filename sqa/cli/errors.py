"""The CLI's error boundary: every exception that bad input can cause becomes one line on stderr.

``error_line(exc)`` turns a user-facing failure (``SqaError``, ``OSError``, ``ValueError``,
``EOFError``, decompression errors, Elasticsearch / tantivy library errors) into one line naming
the file or URL and what to do; it returns None for anything else (a bug, which keeps its
traceback). ``usage_error_line`` does the same for command-line usage errors of click, whether
the real ``click`` package or the copy that typer >= 0.20 vendors as ``typer._click`` (the README's
install has only the latter). ``redact`` (``sqa.redact``, the one redaction) removes credentials from every line printed.
"""

from __future__ import annotations

import errno
import importlib
import re

from sqa.redact import redact  # noqa: F401  (the one redaction; re-exported)
from sqa.types import SqaError

# modules whose exception classes are click's (typer >= 0.20 vendors click as typer._click and
# raises its own classes; older typer and some tools use the real click)
_CLICK_MODULES = ("typer.exceptions", "typer._click.exceptions", "click.exceptions")
_LIBRARY_MODULES = ("elasticsearch", "elastic_transport", "tantivy", "zlib", "lzma", "gzip", "json", "urllib3")

_ERRNO_HINTS = {
    errno.ENOSPC: "no space left on the device; free some space (or use another --index-dir / --out) and run the "
    "same command again to resume",
    errno.EDQUOT: "disk quota exceeded; free some space and run the same command again to resume",
    errno.EFBIG: "file too large for this file system or limit; free space or raise the limit, then run the same "
    "command again to resume",
    errno.EROFS: "read-only file system; use another --index-dir / --out",
    errno.EACCES: "permission denied; check the file's permissions or use another path",
    errno.EPERM: "operation not permitted; check the file's permissions or use another path",
    errno.ENOENT: "no such file or directory; check the path",
    errno.EISDIR: "is a directory; give a file",
    errno.ENOTDIR: "a part of this path is a file, not a directory; check the path",
    errno.EEXIST: "already exists and is in the way; use another path",
    errno.EIO: "input/output error reading or writing the disk; check the device",
}


def _classes(names: tuple[str, ...]) -> tuple[type, ...]:
    out: list[type] = []
    for mod_name in _CLICK_MODULES:
        try:
            mod = importlib.import_module(mod_name)
        except Exception:  # not installed (click is optional), or an old typer without the module
            continue
        for name in names:
            cls = getattr(mod, name, None)
            if isinstance(cls, type) and cls not in out:
                out.append(cls)
    return tuple(out)


def click_classes() -> dict[str, tuple[type, ...]]:
    """``{"exit", "abort", "usage", "click", "no_args"}`` -> the matching exception classes of
    every click copy that is importable (``typer._click``, ``click``, typer's own Exit/Abort)."""
    return {
        "exit": _classes(("Exit",)),
        "abort": _classes(("Abort",)),
        "usage": _classes(("UsageError",)),
        "click": _classes(("ClickException",)),
        "no_args": _classes(("NoArgsIsHelpError",)),
    }


def one_line(text: str) -> str:
    """``text`` with every run of whitespace (newlines included) collapsed to one space."""
    return " ".join(str(text).split())


def os_error_line(e: OSError) -> str:
    """One line for an OSError: the file(s) concerned, what happened, what to do."""
    where = e.filename if e.filename is not None else None
    if e.filename2 is not None:
        where = f"{e.filename} -> {e.filename2}"
    hint = _ERRNO_HINTS.get(e.errno or -1)
    what = hint or (e.strerror or type(e).__name__ or str(e))
    if hint is None and not e.strerror and str(e):
        what = str(e)
    return f"{where}: {what}" if where is not None else f"{type(e).__name__}: {what}"


def _is_library_error(e: BaseException) -> bool:
    mod = (type(e).__module__ or "").split(".")[0]
    return mod in _LIBRARY_MODULES


def error_line(e: BaseException) -> str | None:
    """The one-line message (without the ``error:`` prefix) for an exception bad input, a full
    disk, a lost server or a damaged file can cause; None for anything else (a bug)."""
    if isinstance(e, SqaError):
        msg = str(e)
    elif isinstance(e, OSError):
        msg = os_error_line(e)
    elif isinstance(e, UnicodeError):
        msg = f"input is not UTF-8 text ({e}); save the file as UTF-8"
    elif isinstance(e, EOFError):
        msg = f"unexpected end of input ({e or 'file truncated'}); the file is cut short, re-create or re-download it"
    elif isinstance(e, (ValueError, OverflowError)) or _is_library_error(e):
        msg = f"{type(e).__name__}: {e}"
        code = re.search(r"os error (\d+)", msg)
        if code and int(code.group(1)) in _ERRNO_HINTS:
            msg += f"; {_ERRNO_HINTS[int(code.group(1))]}"
    else:
        return None
    return redact(one_line(msg))


def usage_error_line(e: BaseException) -> str:
    """One line for a click usage error: ``sqa search: Missing argument 'QUERY'. (see `sqa search --help`)``."""
    ctx = getattr(e, "ctx", None)
    path = getattr(ctx, "command_path", None) or "sqa"
    try:
        message = e.format_message()
    except Exception:
        message = str(e)
    return redact(one_line(f"{path}: {message} (see `{path} --help`)"))
