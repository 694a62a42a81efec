"""A real S3 API on loopback for the tests: moto's server mode as a subprocess on a free port.

``s3_server`` (module scope) starts ``python -m moto.server`` and stops it; ``s3_env`` points this process
and the commands it starts at it (the standard AWS environment: ``AWS_ENDPOINT_URL``, ``AWS_ALLOW_HTTP``,
test credentials) and creates a fresh bucket; ``s3_store`` is an ``s3://`` store URL in it;
``wait_until_unlocked`` waits for the leases of a store's locks to run out. Without moto the tests skip on a
developer machine and FAIL in CI (CI=true), where the test extra must be installed.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Iterator

import pytest

_BUCKETS = itertools.count()


@dataclass(frozen=True)
class S3Server:
    endpoint: str  # http://127.0.0.1:PORT
    process: subprocess.Popen

    def env(self) -> dict[str, str]:
        """The environment a command needs to reach this server (on top of os.environ)."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ALLOW_HTTP": "true", "AWS_ACCESS_KEY_ID": "testing",
                "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"}

    def make_bucket(self, name: str) -> None:
        from pyarrow import fs

        s3 = fs.S3FileSystem(endpoint_override=self.endpoint.split("://", 1)[1], scheme="http",
                             access_key="testing", secret_key="testing", region="us-east-1",
                             allow_bucket_creation=True)
        s3.create_dir(name)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _missing(message: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{message}; CI must have it (pip install -e '.[test]')")
    pytest.skip(message)


def _serve(extra_env: dict[str, str] | None = None) -> Iterator[S3Server]:
    if importlib.util.find_spec("moto") is None or importlib.util.find_spec("flask") is None:
        _missing("moto[server] is not installed: no S3 server on loopback")
    port = _free_port()
    process = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env={**os.environ, **(extra_env or {})})
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                pytest.fail(f"moto's S3 server did not start on port {port}")
            time.sleep(0.1)
    try:
        yield S3Server(f"http://127.0.0.1:{port}", process)
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()


@pytest.fixture(scope="module")
def s3_server() -> Iterator[S3Server]:
    yield from _serve()


# Requests the server answers before it checks credentials: those that make the IAM user, its key and policy.
_SETUP_REQUESTS = 4


@pytest.fixture(scope="module")
def s3_server_checking_keys() -> Iterator[tuple[S3Server, dict[str, str]]]:
    """A server that refuses requests not signed with a key of its IAM user (moto's IAM checks, on after the
    set-up), with that user's key: (server, {"id": ..., "secret": ...})."""
    import json

    for server in _serve({"INITIAL_NO_AUTH_ACTION_COUNT": str(_SETUP_REQUESTS)}):
        import boto3

        iam = boto3.client("iam", endpoint_url=server.endpoint, region_name="us-east-1",
                           aws_access_key_id="setup", aws_secret_access_key="setup")
        iam.create_user(UserName="team")
        key = iam.create_access_key(UserName="team")["AccessKey"]
        policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
        arn = iam.create_policy(PolicyName="all", PolicyDocument=json.dumps(policy))["Policy"]["Arn"]
        iam.attach_user_policy(UserName="team", PolicyArn=arn)
        yield server, {"id": key["AccessKeyId"], "secret": key["SecretAccessKey"]}


@pytest.fixture
def s3_env(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch, tmp_path) -> S3Server:
    """This process and its children pointed at the server; journals of s3 stores under tmp_path."""
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_CONDITIONAL_PUT", "AWS_S3_LOCKING_PROVIDER",
                 "AWS_ENDPOINT_URL_S3", "BEDSIDE_STORE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return s3_server


@pytest.fixture
def s3_store(s3_env: S3Server) -> str:
    """An empty store URL in a bucket of its own."""
    bucket = f"bedside-test-{os.getpid()}-{next(_BUCKETS)}"
    s3_env.make_bucket(bucket)
    return f"s3://{bucket}/store"


def wait_until_unlocked(store: str, timeout: float = 60.0) -> None:
    """Return once no lock of the store (its runs' and the store lock) is held by a lease that has not run out:
    the moment a writer may take over the locks of one killed or stalled (polled, bounded by ``timeout``)."""
    from toolkit.store import leases
    from toolkit.store.location import parse

    deadline = time.monotonic() + timeout
    while True:
        held = []
        for lock in (parse(store) / ".locks").listing():
            table = leases._table(lock)
            try:
                row = leases._holder(table)
            finally:
                leases._keep(lock, table)
            if row is not None and row["expires"] > time.time():
                held.append(lock.name)
        if not held:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"{store}: leases of {', '.join(held)} still held after {timeout:.0f} s")
        time.sleep(0.05)


class FaultyProxy:
    """An HTTP proxy on loopback in front of the S3 server that passes reads on (a body sent chunked, as
    uploads are, is not), but answers those a rule picks with a fault: ``"503"`` (the service unavailable, as
    S3 says under load), ``"reset"`` (the connection closed without a reply) or ``"403"`` (access denied).
    ``rule(method, path)`` (path and query, %-decoded) -> a fault or None; ``faulted`` lists the requests
    answered so."""

    def __init__(self, server: S3Server) -> None:
        import http.server
        import threading

        self.rule = lambda method, path: None
        self.faulted: list[tuple[str, str]] = []
        upstream = server.endpoint.split("://", 1)[1]
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet
                pass

            def _pass(self) -> None:
                import http.client
                from urllib.parse import unquote

                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                fault = proxy.rule(self.command, unquote(self.path))
                if fault is not None:
                    proxy.faulted.append((self.command, self.path))
                    return self._fault(fault)
                conn = http.client.HTTPConnection(upstream, timeout=60)
                try:
                    conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
                    for name, value in self.headers.items():
                        conn.putheader(name, value)
                    conn.endheaders(body or None)
                    reply = conn.getresponse()
                    data = reply.read()
                finally:
                    conn.close()
                self.send_response(reply.status, reply.reason)
                for name, value in reply.getheaders():
                    if name.lower() not in ("content-length", "transfer-encoding", "connection", "date", "server"):
                        self.send_header(name, value)
                # a HEAD's length is the object's (its body is empty)
                size = reply.getheader("Content-Length") if self.command == "HEAD" else None
                self.send_header("Content-Length", size or str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            def _fault(self, fault: str) -> None:
                if fault == "reset":
                    import socket as sockets
                    import struct

                    # SO_LINGER 0: the close sends a TCP reset, as a dropped connection does
                    self.connection.setsockopt(sockets.SOL_SOCKET, sockets.SO_LINGER, struct.pack("ii", 1, 0))
                    self.close_connection = True
                    return
                code, name = {"503": (503, "ServiceUnavailable"), "403": (403, "AccessDenied")}[fault]
                data = (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{name}</Code>'
                        f"<Message>{name}</Message></Error>").encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", "0" if self.command == "HEAD" else str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _pass

        self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


@pytest.fixture
def faulty_proxy(s3_env: S3Server) -> Iterator[FaultyProxy]:
    """A ``FaultyProxy`` in front of the server, for reads: point AWS_ENDPOINT_URL at its ``endpoint``."""
    proxy = FaultyProxy(s3_env)
    try:
        yield proxy
    finally:
        proxy.close()
