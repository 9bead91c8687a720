"""The part of httpx that AnimaWorks' tool templates and common tools use, over the host's fetch.

Requests go through the Anima's network policy on the host (private and metadata addresses refused,
the policy's hosts only); a refusal raises the host's error (its type is kept to the end of the call).
`timeout` is seconds, as in httpx: one total time per request. Only what is here exists: no HTTP/2,
streaming, proxies, cookies jars or authentication helpers.
"""

from __future__ import annotations

import json as _json
import urllib.parse as _parse
from typing import Any

__all__ = [
    "Client",
    "HTTPError",
    "HTTPStatusError",
    "Headers",
    "Request",
    "RequestError",
    "Response",
    "Timeout",
    "TimeoutException",
    "TransportError",
    "delete",
    "get",
    "head",
    "patch",
    "post",
    "put",
    "request",
]

#: httpx's own default: 5 s.
DEFAULT_TIMEOUT_S = 5.0
#: The host's longest fetch, ms: a longer timeout asks for that (the call's own timeout bounds it anyway).
MAX_FETCH_TIMEOUT_MS = 120_000


class HTTPError(Exception):
    def __init__(self, message: str, *, request: Request | None = None) -> None:
        super().__init__(message)
        self.request = request


class RequestError(HTTPError):
    pass


class TransportError(RequestError):
    pass


class TimeoutException(TransportError):
    pass


class HTTPStatusError(HTTPError):
    def __init__(self, message: str, *, request: Request, response: Response) -> None:
        super().__init__(message, request=request)
        self.response = response


class Timeout:
    def __init__(self, timeout: float | None = DEFAULT_TIMEOUT_S, **_: Any) -> None:
        self.timeout = timeout


class Headers(dict):
    """Case-insensitive for reading, as httpx's."""

    def __init__(self, items: Any = None) -> None:
        super().__init__()
        for key, value in dict(items or {}).items():
            self[key] = value

    def __setitem__(self, key: str, value: str) -> None:
        super().__setitem__(str(key).lower(), str(value))

    def __getitem__(self, key: str) -> str:
        return super().__getitem__(str(key).lower())

    def __contains__(self, key: object) -> bool:
        return super().__contains__(str(key).lower())

    def get(self, key: str, default: Any = None) -> Any:
        return super().get(str(key).lower(), default)


class Request:
    def __init__(self, method: str, url: str, headers: Headers, content: bytes | None) -> None:
        self.method = method
        self.url = url
        self.headers = headers
        self.content = content or b""


class Response:
    def __init__(self, status_code: int, *, headers: Any = None, content: bytes = b"", request: Request | None = None, reason: str = "") -> None:
        self.status_code = status_code
        self.headers = Headers(headers)
        self.content = content
        self.request = request
        self.reason_phrase = reason
        self.url = request.url if request else ""

    @property
    def encoding(self) -> str:
        content_type = self.headers.get("content-type", "")
        for part in content_type.split(";")[1:]:
            key, _, value = part.strip().partition("=")
            if key.lower() == "charset" and value:
                return value.strip('"')
        return "utf-8"

    @property
    def text(self) -> str:
        return self.content.decode(self.encoding, "replace")

    def json(self, **kwargs: Any) -> Any:
        return _json.loads(self.content.decode(self.encoding, "replace"), **kwargs)

    @property
    def is_success(self) -> bool:
        return 200 <= self.status_code < 300

    @property
    def is_error(self) -> bool:
        return self.status_code >= 400

    def raise_for_status(self) -> Response:
        if self.status_code >= 400:
            kind = "Client error" if self.status_code < 500 else "Server error"
            message = f"{kind} '{self.status_code} {self.reason_phrase}' for url '{self.url}'"
            raise HTTPStatusError(message, request=self.request, response=self)  # type: ignore[arg-type]
        return self

    def __repr__(self) -> str:
        return f"<Response [{self.status_code} {self.reason_phrase}]>"


def _seconds(timeout: Any) -> float | None:
    if isinstance(timeout, Timeout):
        return timeout.timeout
    return None if timeout is None else float(timeout)


def _with_params(url: str, params: Any) -> str:
    if not params:
        return url
    pairs = list(params.items()) if hasattr(params, "items") else list(params)
    flat: list[tuple[str, str]] = []
    for key, value in pairs:
        values = value if isinstance(value, (list, tuple)) else [value]
        flat.extend((str(key), _param(v)) for v in values)
    query = _parse.urlencode(flat)
    return url + ("&" if "?" in url else "?") + query


def _param(value: Any) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    return "" if value is None else str(value)


def _send(method: str, url: str, *, params: Any = None, headers: Any = None, json: Any = None, data: Any = None, content: Any = None, timeout: Any = DEFAULT_TIMEOUT_S) -> Response:
    import _animaworks_host
    from _animaworks_runtime import HostError, wait

    sent = Headers(headers)
    body: bytes | None = None
    if json is not None:
        body = _json.dumps(json, ensure_ascii=False).encode("utf-8")
        sent.setdefault("content-type", "application/json")
    elif data is not None:
        if isinstance(data, (bytes, bytearray, str)):
            body = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        else:
            body = _parse.urlencode(data, doseq=True).encode("utf-8")
            sent.setdefault("content-type", "application/x-www-form-urlencoded")
    elif content is not None:
        body = content.encode("utf-8") if isinstance(content, str) else bytes(content)
    full_url = _with_params(url, params)
    request = Request(method.upper(), full_url, sent, body)
    seconds = _seconds(timeout)
    init = {"method": request.method, "headers": dict(sent)}
    if seconds is not None:
        init["timeoutMs"] = min(MAX_FETCH_TIMEOUT_MS, max(1, int(seconds * 1000)))
    from pyodide.ffi import to_js

    try:
        answer = wait(_animaworks_host.fetch(full_url, _json.dumps(init), to_js(body) if body else None))
    except HostError as error:
        if error.type == "Timeout":
            raised: HTTPError = TimeoutException(str(error), request=request)
        elif error.type in ("NetworkError", "ExecutionError"):
            raised = TransportError(str(error), request=request)
        else:
            raise
        raised._js_error = error._js_error  # type: ignore[attr-defined]
        raise raised from None
    response = Response(
        int(answer.status),
        headers=_json.loads(answer.headersJson),
        content=answer.body.to_bytes(),
        request=request,
        reason=str(answer.statusText),
    )
    response.url = str(answer.url)
    return response


def request(method: str, url: str, **kwargs: Any) -> Response:
    return _send(method, url, **kwargs)


def get(url: str, **kwargs: Any) -> Response:
    return _send("GET", url, **kwargs)


def head(url: str, **kwargs: Any) -> Response:
    return _send("HEAD", url, **kwargs)


def delete(url: str, **kwargs: Any) -> Response:
    return _send("DELETE", url, **kwargs)


def post(url: str, **kwargs: Any) -> Response:
    return _send("POST", url, **kwargs)


def put(url: str, **kwargs: Any) -> Response:
    return _send("PUT", url, **kwargs)


def patch(url: str, **kwargs: Any) -> Response:
    return _send("PATCH", url, **kwargs)


class Client:
    """`with httpx.Client(base_url=…, headers=…, timeout=…) as client: client.get(…)`."""

    def __init__(self, *, base_url: str = "", headers: Any = None, params: Any = None, timeout: Any = DEFAULT_TIMEOUT_S, **_: Any) -> None:
        self.base_url = base_url
        self.headers = Headers(headers)
        self.params = params
        self.timeout = timeout

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        pass

    def request(self, method: str, url: str, **kwargs: Any) -> Response:
        merged = Headers(self.headers)
        merged.update(Headers(kwargs.pop("headers", None)))
        kwargs.setdefault("timeout", self.timeout)
        if self.params and "params" not in kwargs:
            kwargs["params"] = self.params
        full = url if "://" in url or not self.base_url else self.base_url.rstrip("/") + "/" + url.lstrip("/")
        return _send(method, full, headers=merged, **kwargs)

    def get(self, url: str, **kwargs: Any) -> Response:
        return self.request("GET", url, **kwargs)

    def post(self, url: str, **kwargs: Any) -> Response:
        return self.request("POST", url, **kwargs)

    def put(self, url: str, **kwargs: Any) -> Response:
        return self.request("PUT", url, **kwargs)

    def patch(self, url: str, **kwargs: Any) -> Response:
        return self.request("PATCH", url, **kwargs)

    def delete(self, url: str, **kwargs: Any) -> Response:
        return self.request("DELETE", url, **kwargs)

    def head(self, url: str, **kwargs: Any) -> Response:
        return self.request("HEAD", url, **kwargs)
