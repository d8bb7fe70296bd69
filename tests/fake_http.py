"""A stand-in for the network under pooch's HTTP downloader (``requests.get``), for tests of the download path that
need no server: each URL answers with bytes, a declared length, or not at all (tests/test_data_download.py runs the
same path against a real HTTP server on 127.0.0.1)."""
from __future__ import annotations

import requests


class _Response:
    def __init__(self, url: str, body: bytes, declared: int | None):
        self.url, self.body, self.status_code, self.reason, self.is_redirect = url, body, 200, "OK", False
        self.headers = {"content-length": str(len(body) if declared is None else declared)}
        self.declared = declared

    def raise_for_status(self) -> None:
        pass

    def iter_content(self, chunk_size: int = 1):
        for start in range(0, len(self.body), chunk_size):
            yield self.body[start:start + chunk_size]
        if self.declared is not None and self.declared > len(self.body):  # the connection closed early
            raise requests.exceptions.ChunkedEncodingError("Connection broken: IncompleteRead")


def serve(monkeypatch, answer, tried: list | None = None) -> None:
    """``requests.get`` answering ``answer(url)``: bytes, ``(bytes, declared length)`` for a body cut short, or
    None for an unreachable host. Each URL asked is appended to ``tried``."""
    def get(url, timeout=None, stream=False, headers=None, hooks=None, **kwargs):
        if tried is not None:
            tried.append(url)
        answered = answer(url)
        if answered is None:
            raise requests.ConnectionError("Name or service not known")
        body, declared = answered if isinstance(answered, tuple) else (answered, None)
        response = _Response(url, body, declared)
        for hook in (hooks or {}).values():
            hook(response)
        return response

    monkeypatch.setattr(requests, "get", get)
