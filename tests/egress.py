"""A dead end on loopback for the traffic a harness CLI sends beyond its model: an HTTP proxy
that refuses every request and keeps the first line of each, so a test's CLI never reaches the
network (telemetry, feature flags, update checks) and the test can say what it tried.

    with Egress() as egress:
        env = {**env, **egress.env()}        # HTTPS_PROXY / HTTP_PROXY here, 127.0.0.1 direct
        ...
        egress.attempts                      # ["CONNECT api.anthropic.com:443 HTTP/1.1", ...]

Claude Code's channel gate reads a feature flag that only stays on with its nonessential
traffic allowed; this keeps that traffic here.
"""

from __future__ import annotations

import socket
import threading

REFUSAL = b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


class Egress:
    def __init__(self) -> None:
        self.attempts: list[str] = []
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind(("127.0.0.1", 0))
        self._socket.listen(64)
        self.port = self._socket.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, name=f"egress-{self.port}", daemon=True)
        self._thread.start()

    def env(self) -> dict[str, str]:
        proxy = f"http://127.0.0.1:{self.port}"
        return {"HTTPS_PROXY": proxy, "HTTP_PROXY": proxy, "https_proxy": proxy, "http_proxy": proxy,
                "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._socket.accept()
            except OSError:
                return  # closed
            with conn:
                try:
                    conn.settimeout(5)
                    first = conn.recv(4096).split(b"\r\n", 1)[0]
                    self.attempts.append(first.decode(errors="replace"))
                    conn.sendall(REFUSAL)
                except OSError:
                    pass

    def close(self) -> None:
        try:
            self._socket.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._socket.close()
        self._thread.join(timeout=5)

    def __enter__(self) -> Egress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
