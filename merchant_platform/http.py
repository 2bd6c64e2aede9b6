"""The one outgoing HTTP client: bounded timeouts, retries on connect errors, requestId forwarded."""

from __future__ import annotations

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from merchant_platform.context import REQUEST_ID_HEADER, current_request_id

DEFAULT_TIMEOUT = (3.05, 10)


class PlatformSession(requests.Session):
    def __init__(self, *, retries: int = 2):
        super().__init__()
        adapter = HTTPAdapter(max_retries=Retry(total=retries, connect=retries, read=0, backoff_factor=0.2, allowed_methods=None))
        self.mount("http://", adapter)
        self.mount("https://", adapter)

    def request(self, method, url, *args, **kwargs):
        kwargs.setdefault("timeout", DEFAULT_TIMEOUT)
        headers = kwargs.pop("headers", None) or {}
        request_id = current_request_id()
        if request_id and REQUEST_ID_HEADER not in headers:
            headers[REQUEST_ID_HEADER] = request_id
        return super().request(method, url, *args, headers=headers, **kwargs)


def session(**kwargs) -> PlatformSession:
    return PlatformSession(**kwargs)
