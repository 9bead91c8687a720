"""The host side of a Python tool, inside its isolate (sandbox/python-runtime.ts boots it).

Loads one tool module from its source text and runs its functions for the JavaScript glue, which is
called by the prelude like any tool module. Everything crosses as JSON text. Capabilities are the
prelude's (files, fetch, credentials, the call's log), reached through the `_animaworks_host` module
that the glue registers; a Python call waits for them with `run_sync` (WebAssembly stack switching), so
synchronous tools such as the AnimaWorks seed's run unmodified.

Invariants:
 - Nothing here is a boundary: Python code can reach the whole JavaScript global. Every limit and every
   decision about who a call acts for is the host's, on its side of the isolate.
 - A capability failure raised by the host keeps its JavaScript error object, so that a host denial
   that reaches the top of the call is reported as the host's own (a tool cannot forge one).
"""

from __future__ import annotations

import inspect
import io
import json
import logging
import os
import sys
import traceback
import types

import _animaworks_files
import _animaworks_host

#: Frames of the tool's own file named in an error, innermost first.
MAX_ERROR_FRAMES = 4
#: Characters of an error message kept (the host bounds it again).
MAX_MESSAGE_CHARS = 4_000

_LEVELS = {"DEBUG": "debug", "INFO": "info", "WARNING": "warn", "ERROR": "error", "CRITICAL": "error"}


class HostError(Exception):
    """A capability the host refused or that failed; `type` is the host's error type."""

    def __init__(self, type_: str, message: str, js_error: object) -> None:
        super().__init__(message)
        self.type = type_
        self._js_error = js_error


class _CallLog(logging.Handler):
    """Log records go to the call's log (the host bounds and attributes them)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
            if record.exc_info:
                message += "\n" + "".join(traceback.format_exception(*record.exc_info))
            _animaworks_host.log(_LEVELS.get(record.levelname, "info"), message)
        except Exception:
            pass


def _configure_logging() -> None:
    root = logging.getLogger()
    root.handlers[:] = [_CallLog()]
    root.setLevel(logging.INFO)


def wait(promise: object) -> object:
    """The value of a capability's promise; its failure as HostError (or what the caller maps it to)."""
    from pyodide.ffi import JsException, run_sync

    try:
        return run_sync(promise)
    except JsException as error:
        js_error = getattr(error, "js_error", None)
        name = str(getattr(js_error, "name", "") or "CapabilityError")
        message = str(getattr(js_error, "message", "") or error)
        raise HostError(name, message, js_error) from None


#: The tool module of this isolate (one tool per isolate), once loaded.
_tool: types.ModuleType | None = None

#: What a tool module's name starts with. Registered under its bare file name, a tool named like a
#: standard-library module (calendar.py, json.py) replaced that module: its own `import calendar`, and
#: any later import of it by the standard library or this runtime, got the tool. The name is also the
#: module's `__name__`, so that what looks a class up by its module (dataclasses, pickle) finds it.
TOOL_MODULE_PREFIX = "_animaworks_tool_"


def load_tool(source: str, file_name: str) -> str:
    """Runs the tool's top level as a module of its own (`TOOL_MODULE_PREFIX` + its name); its exports, or why it failed, as JSON."""
    global _tool
    name = TOOL_MODULE_PREFIX + (file_name[:-3] if file_name.endswith(".py") else file_name)
    module = types.ModuleType(name)
    module.__file__ = file_name
    sys.modules[name] = module
    try:
        code = compile(source, file_name, "exec", dont_inherit=True)
        exec(code, module.__dict__)
    except ModuleNotFoundError as error:
        missing = (error.name or "").split(".")[0]
        message = f"{missing} is not available: Python tools run with the standard library and httpx only (use httpx with a timeout, or urllib.request)"
        return _failure(error, file_name, message)
    except BaseException as error:  # noqa: BLE001 - the tool's top level failed: its load error
        return _failure(error, file_name)
    _tool = module
    return json.dumps({"ok": True, "value": _exports(module)}, ensure_ascii=False, default=str)


def _exports(module: types.ModuleType) -> dict[str, object]:
    """The module's public names and what they are, as the prelude's describe reports exports."""
    found: dict[str, object] = {}
    for key, value in list(module.__dict__.items()):
        if key.startswith("_") or isinstance(value, types.ModuleType):
            continue
        if key == "EXECUTION_PROFILE":
            found[key] = value
        elif callable(value) and not isinstance(value, type):
            found[key] = "function"
    return found


def _tool_frames(error: BaseException, file_name: str) -> str:
    frames = [frame for frame in traceback.extract_tb(error.__traceback__) if frame.filename == file_name]
    places = [f"{file_name}:{frame.lineno}" for frame in reversed(frames)][:MAX_ERROR_FRAMES]
    if not places:
        return ""
    return " (in " + places[0] + "".join(f", called from {place}" for place in places[1:]) + ")"


def call(name: str, args_json: str, cli_anima_dir: str | None = None) -> str:
    """
    Calls `name` of the loaded tool with the JSON arguments; the outcome as JSON text. `cli_anima_dir` is
    the Anima's folder of a cli_main call, which AnimaWorks runs with ANIMAWORKS_ANIMA_DIR set: it is set
    for the call, and removed after it.
    """
    module = _tool
    assert module is not None, "no tool is loaded"
    args = json.loads(args_json)
    # The folder the host named for this call: paths under it are the Anima's files.
    given = next((arg["anima_dir"] for arg in args if isinstance(arg, dict) and isinstance(arg.get("anima_dir"), str)), None)
    _animaworks_files.anima_dir = cli_anima_dir if isinstance(cli_anima_dir, str) else given
    capture = name in ("cli_main", "cliMain")
    if capture and isinstance(cli_anima_dir, str):
        os.environ["ANIMAWORKS_ANIMA_DIR"] = cli_anima_dir
    stdout = sys.stdout
    buffer = io.StringIO()
    try:
        if capture:
            sys.stdout = buffer
        try:
            value = getattr(module, name)(*args)
            if inspect.isawaitable(value):
                from pyodide.ffi import run_sync

                value = run_sync(value)
        finally:
            sys.stdout = stdout
        if capture:
            printed = buffer.getvalue()
            value = printed if value is None else (printed + str(value) if printed else value)
        if isinstance(value, (bytes, bytearray)):
            value = bytes(value).decode("utf-8", "replace")
        return json.dumps({"ok": True, "value": value}, ensure_ascii=False, default=str)
    except SystemExit as error:
        if capture and error.code in (None, 0):
            return json.dumps({"ok": True, "value": buffer.getvalue()}, ensure_ascii=False)
        return _failure(error, module.__file__ or name, f"exited with status {error.code}")
    except BaseException as error:  # noqa: BLE001 - every failure is the tool's outcome
        return _failure(error, module.__file__ or name)
    finally:
        if capture:
            os.environ.pop("ANIMAWORKS_ANIMA_DIR", None)


def _failure(error: BaseException, file_name: str, message: str | None = None) -> str:
    text = message if message is not None else str(error)
    outcome: dict[str, object] = {
        "ok": False,
        "type": type(error).__name__,
        "message": text[:MAX_MESSAGE_CHARS],
        "where": _tool_frames(error, file_name),
    }
    js_error = getattr(error, "_js_error", None)
    if js_error is not None:
        outcome["host"] = _animaworks_host.host_error(js_error)
    from core.tools._base import ToolConfigError

    if isinstance(error, ToolConfigError):
        outcome["config"] = True
    return json.dumps(outcome, ensure_ascii=False, default=str)


def _install_urllib() -> None:
    """`urllib.request.urlopen` of http(s) URLs goes through the host's fetch (the interpreter has no sockets)."""
    import email.message
    import urllib.error
    import urllib.request
    import urllib.response

    class HostHandler(urllib.request.BaseHandler):
        handler_order = 100  # before urllib's own HTTP handlers

        def _open(self, request: urllib.request.Request) -> urllib.response.addinfourl:
            from pyodide.ffi import to_js

            # urllib adds Host, Content-Length and Connection itself; the host derives them from the request.
            derived = {"host", "content-length", "connection", "transfer-encoding"}
            headers_sent = {key: value for key, value in request.header_items() if key.lower() not in derived}
            init: dict[str, object] = {"method": request.get_method(), "headers": headers_sent}
            timeout = getattr(request, "timeout", None)
            if isinstance(timeout, (int, float)):
                from httpx import MAX_FETCH_TIMEOUT_MS

                init["timeoutMs"] = min(MAX_FETCH_TIMEOUT_MS, max(1, int(timeout * 1000)))
            body = request.data if isinstance(request.data, (bytes, bytearray)) else None
            try:
                answer = wait(_animaworks_host.fetch(request.full_url, json.dumps(init), to_js(bytes(body)) if body else None))
            except HostError as error:
                if error.type == "Timeout":
                    raised: OSError = TimeoutError(str(error))
                else:
                    raised = urllib.error.URLError(str(error))
                raised._js_error = error._js_error  # type: ignore[attr-defined]
                raise raised from None
            headers = email.message.Message()
            for key, value in json.loads(answer.headersJson).items():
                headers[key] = value
            response = urllib.response.addinfourl(io.BytesIO(answer.body.to_bytes()), headers, str(answer.url), int(answer.status))
            response.msg = str(answer.statusText)  # type: ignore[attr-defined]
            return response  # urllib's own processors raise HTTPError for an error status

        def http_open(self, request: urllib.request.Request) -> urllib.response.addinfourl:
            return self._open(request)

        def https_open(self, request: urllib.request.Request) -> urllib.response.addinfourl:
            return self._open(request)

    urllib.request.install_opener(urllib.request.build_opener(HostHandler))


_configure_logging()
_install_urllib()
_animaworks_files.install()
