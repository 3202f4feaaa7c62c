"""A throwaway HTTP server on 127.0.0.1 for the download tests: answers from memory, can cut a transfer or fail."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

NAME = "archive.tgz"


@contextmanager
def serving(data: bytes, cut_after: int | None = None, status: int = 200,
            ranges: bool = True, name: str = NAME) -> Iterator[tuple[str, list]]:
    """A server on 127.0.0.1 answering GETs from memory (`Range` -> 206, past the end -> 416; ignored unless `ranges`);
    the first answer cut after `cut_after` bytes; `status` >= 400 answers that. Yields its URL and each Range asked."""
    seen: list[str | None] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.headers.get("Range"))
            asked = seen[-1] if ranges else None
            if status >= 400:
                self.send_error(status)
                return
            start = int(asked.removeprefix("bytes=").rstrip("-")) if asked else 0
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.end_headers()
                return
            body = data[start:]
            self.send_response(206 if asked else 200)
            if asked:
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            first_and_cut = cut_after is not None and len(seen) == 1
            self.wfile.write(body[:cut_after] if first_and_cut else body)  # HTTP/1.0: the connection closes after

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/files/{name}", seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
