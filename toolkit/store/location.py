"""Where a store lies: a local folder (a ``Path``, exactly as always) or an ``s3://bucket/prefix`` URL.

An object-store root is an ``ObjectPath``: the few ``Path`` operations the store uses (``/``, ``name``,
``parent``, ``exists``, ``is_dir``, ``iterdir``, ``stat``, ``read_bytes``, ``write_bytes``, ``unlink``)
done through ``pyarrow.fs.S3FileSystem``; Delta tables under it are opened by deltalake with
``storage_options``. Both take their settings from the standard AWS environment: ``AWS_ENDPOINT_URL`` (an
S3-compatible store such as MinIO or Ceph), ``AWS_REGION``, ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/
``AWS_SESSION_TOKEN`` or ``AWS_PROFILE`` (resolved here by botocore: delta-rs reads no profile),
``AWS_ALLOW_HTTP=true`` for a plain-http endpoint. An ``ObjectPath`` has no ``__fspath__``: a local-only
call on it fails loudly instead of making a folder named ``s3:``.

Commits are safe on S3 by conditional put (``AWS_CONDITIONAL_PUT=etag``, the default here), or by the
DynamoDB locking provider when the user configures one (``AWS_S3_LOCKING_PROVIDER=dynamodb`` with
``DELTA_DYNAMO_TABLE_NAME``); with neither (``AWS_CONDITIONAL_PUT=disabled``) ``unsafe_to_write`` says so
and the store refuses to write.
"""

from __future__ import annotations

import os
import re
import threading
from functools import lru_cache
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Iterator

from toolkit.store.errors import StoreError

SCHEMES = ("s3://", "s3a://")
_FS_GUARD = threading.Lock()


def is_url(text: str) -> bool:
    """``scheme://...`` (string methods: a local store's commands compile no pattern for it)."""
    scheme, sep, _ = text.partition("://")
    return bool(sep) and scheme[:1].isalpha() and scheme.replace("+", "").replace(".", "").replace("-", "").isalnum()


def parse(root: "str | os.PathLike[str] | ObjectPath") -> "Path | ObjectPath":
    """A store root: an ``ObjectPath`` for an ``s3://`` URL (StoreError, one line, for another scheme or a
    URL without a bucket), else a ``Path`` as given."""
    if isinstance(root, (Path, ObjectPath)):
        return root
    text = os.fspath(root)
    if not is_url(text):
        return Path(text)
    if not text.lower().startswith(SCHEMES):
        raise StoreError(f"{text}: not a store location bedside knows (a folder, or an s3://bucket/prefix URL)")
    rest = text.split("://", 1)[1].strip("/")
    if not rest or rest.split("/", 1)[0] in ("", ".", ".."):
        raise StoreError(f"{text}: an S3 store URL names a bucket: s3://bucket/prefix")
    # pyarrow takes the key as it is, delta-rs parses it as a URL (resolves '.' and '..', decodes %2F, cuts at
    # '?' and '#', panics at '\'): the two would write and read different keys, so neither may be in it.
    odd = next((c for c in rest if c in "%?#\\" or not c.isprintable()), None)
    if odd is not None or any(part in (".", "..") for part in rest.split("/")):
        shown = repr(odd) if odd is not None else "'.' or '..' as a segment"
        raise StoreError(f"{text}: {shown} cannot be part of an S3 store URL (give the prefix as its keys are named)")
    return ObjectPath("s3://" + re.sub(r"/+", "/", rest))


def is_remote(path: Any) -> bool:
    return isinstance(path, ObjectPath)


# -- settings from the AWS environment ------------------------------------------------------------------

def _env(*names: str) -> str | None:
    for name in names:
        value = os.environ.get(name)
        if value:
            return value
    return None


def _allow_http() -> bool:
    return (_env("AWS_ALLOW_HTTP") or "").strip().lower() in ("true", "1", "yes")


def endpoint() -> str | None:
    return _env("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")


def check_settings(url: str) -> None:
    """StoreError (one line) for settings no request can succeed with: a plain-http endpoint not allowed."""
    found = endpoint()
    if found and found.lower().startswith("http://") and not _allow_http():
        raise StoreError(f"{url}: AWS_ENDPOINT_URL {found} is plain http; set AWS_ALLOW_HTTP=true to use it")


@lru_cache(maxsize=4)
def _profile_credentials(profile: str, region: str | None) -> Any:
    """The profile's botocore credentials, kept: a role's or SSO's renew themselves as they near expiry."""
    import botocore.session

    session = botocore.session.Session(profile=profile)
    if region:  # botocore reads AWS_DEFAULT_REGION only; a role's STS call needs the AWS_REGION we document
        session.set_config_variable("region", region)
    return session.get_credentials()


def _profile_keys(profile: str, region: str | None) -> tuple[tuple[str, str], ...]:
    try:
        import botocore.exceptions
    except ImportError:
        raise StoreError(f"AWS_PROFILE={profile}: reading an AWS profile needs botocore (pip install "
                         f"'bedside[s3]'), or export its keys: eval \"$(aws configure export-credentials "
                         f"--profile {profile} --format env)\"") from None
    try:
        found = _profile_credentials(profile, region)
        # asked at each use, not frozen once: assumed-role and SSO keys expire (an hour) during a long run
        keys = found.get_frozen_credentials() if found is not None else None
    except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError, ValueError) as error:
        # ClientError: STS refused the role; ValueError: a credential process printed no JSON
        raise StoreError(f"AWS_PROFILE={profile}: {first_line(error)}") from None
    if keys is None or not keys.access_key:
        raise StoreError(f"AWS_PROFILE={profile}: the profile gives no credentials")
    pairs = [("AWS_ACCESS_KEY_ID", keys.access_key), ("AWS_SECRET_ACCESS_KEY", keys.secret_key)]
    return tuple(pairs + ([("AWS_SESSION_TOKEN", keys.token)] if keys.token else []))


def credentials() -> dict[str, str]:
    """The keys of the profile the environment names (``AWS_PROFILE``, no keys set): delta-rs reads no profile,
    so it is resolved here as the AWS CLI would (botocore: static keys, a role, SSO, a credential process).
    {} when the environment holds keys or names no profile: each client's default chain then applies.
    StoreError (one line) for a profile that gives no keys."""
    profile = _env("AWS_PROFILE")
    if not profile or _env("AWS_ACCESS_KEY_ID"):
        return {}
    if _env("AWS_SESSION_TOKEN"):  # delta-rs would send it with the profile's keys: every request refused
        raise StoreError(f"AWS_PROFILE={profile}: AWS_SESSION_TOKEN is set without AWS_ACCESS_KEY_ID (left from "
                         "other keys?); unset AWS_SESSION_TOKEN to use the profile")
    return dict(_profile_keys(profile, _env("AWS_REGION", "AWS_DEFAULT_REGION")))


def storage_options() -> dict[str, str]:
    """deltalake's options for an S3 store: conditional-put commits unless the user chose otherwise, and the
    endpoint, region, http setting and profile of the environment (else credentials: the default chain)."""
    options = {"AWS_CONDITIONAL_PUT": _env("AWS_CONDITIONAL_PUT") or "etag", **credentials()}
    for name in ("AWS_REGION", "AWS_S3_LOCKING_PROVIDER", "DELTA_DYNAMO_TABLE_NAME"):
        if _env(name):
            options[name] = _env(name)  # type: ignore[assignment]
    if not _env("AWS_REGION") and _env("AWS_DEFAULT_REGION"):
        options["AWS_REGION"] = _env("AWS_DEFAULT_REGION")  # type: ignore[assignment]
    if endpoint():
        options["AWS_ENDPOINT_URL"] = endpoint()  # type: ignore[assignment]
    if _allow_http():
        options["allow_http"] = "true"
    return options


def unsafe_to_write() -> str | None:
    """Why commits to an S3 store would not be safe with two writers (None: they are): conditional put
    switched off and no locking provider configured."""
    put = (_env("AWS_CONDITIONAL_PUT") or "etag").strip().lower()
    locking = (_env("AWS_S3_LOCKING_PROVIDER") or "").strip().lower()
    if put in ("disabled", "none", "off", "false") and locking != "dynamodb":
        return (f"AWS_CONDITIONAL_PUT={put} and no locking provider, so two writers could overwrite each "
                "other's commits; set AWS_CONDITIONAL_PUT=etag (AWS S3, MinIO, Ceph, ...) or "
                "AWS_S3_LOCKING_PROVIDER=dynamodb with DELTA_DYNAMO_TABLE_NAME")
    return None


def journal_root(root: "ObjectPath") -> Path:
    """This machine's folder for the collection journals of an object store's runs:
    ``$XDG_STATE_HOME/bedside/journals/<digest of the URL>`` (else ``~/.local/state/...``). State, not cache:
    a journal holds answers not yet committed."""
    import hashlib

    state = os.environ.get("XDG_STATE_HOME", "")
    base = Path(state) if os.path.isabs(state) else Path.home() / ".local" / "state"
    return base / "bedside" / "journals" / hashlib.sha256(str(root).encode()).hexdigest()[:20]


@lru_cache(maxsize=8)
def _filesystem(point: str | None, region: str | None, keys: tuple[tuple[str, str], ...]) -> Any:
    from pyarrow import fs

    options: dict[str, Any] = {"region": region or "us-east-1"}
    if point:
        scheme, _, host = point.partition("://")
        options.update(endpoint_override=host.rstrip("/"), scheme=scheme or "https")
    given = dict(keys)
    if given:  # a profile's, resolved as delta-rs gets them
        options.update(access_key=given["AWS_ACCESS_KEY_ID"], secret_key=given["AWS_SECRET_ACCESS_KEY"],
                       session_token=given.get("AWS_SESSION_TOKEN"))
    return fs.S3FileSystem(**options)


def filesystem() -> Any:
    """The pyarrow S3 file system of the environment's settings (one per setting, shared)."""
    with _FS_GUARD:
        return _filesystem(endpoint(), _env("AWS_REGION", "AWS_DEFAULT_REGION"), tuple(credentials().items()))


def first_line(error: BaseException) -> str:
    """An object-store error's first line without terminal colours (delta-rs nests its causes below it)."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(error))
    lines = [line.strip(" ↳") for line in text.splitlines() if line.strip(" ↳")]
    return " / ".join(lines[:3])[:300] or type(error).__name__


# How pyarrow's (the AWS SDK's) and delta-rs's errors name a refusal and a failure that may pass.
_DENIED = ("ACCESS_DENIED", "HTTP status 403", "AccessDenied", "Forbidden", "403 Forbidden")
_TRANSIENT = ("NETWORK_CONNECTION", "SERVICE_UNAVAILABLE", "SLOW_DOWN", "INTERNAL_FAILURE", "REQUEST_TIMEOUT",
              "THROTTLING", "HTTP status 5", "curlCode", "connection reset", "timed out", "timeout",
              "503 Service Unavailable", "500 Internal", "502 Bad Gateway", "504 Gateway")


def denied(error: BaseException) -> bool:
    """Whether an object store's error is a refusal of the request (HTTP 403)."""
    text = str(error)
    return any(word in text for word in _DENIED)


def transient(error: BaseException) -> bool:
    """Whether an object store's error may pass on its own (a 5xx, a connection reset or timeout), after the
    client's own retries gave up."""
    text = str(error).lower()
    return any(word.lower() in text for word in _TRANSIENT)


def what_failed(error: BaseException) -> str:
    """An object store's failed request said as what happened: access denied, a transient error, or its
    first line."""
    line = first_line(error)
    if denied(error):
        return f"access denied ({line}); check the credentials' permissions on the bucket"
    if transient(error):
        return f"a transient error of the object store, try again ({line})"
    return line


# -- an object-store path ------------------------------------------------------------------------------

class ObjectPath:
    """A key (or key prefix) in an S3 bucket, with the ``Path`` operations the store uses."""

    __slots__ = ("url", "_info")

    def __init__(self, url: str, info: Any = None) -> None:
        self.url = url.rstrip("/")
        self._info = info  # a listing's FileInfo: stat() without another request

    def __truediv__(self, name: str) -> "ObjectPath":
        return ObjectPath(f"{self.url}/{str(name).strip('/')}")

    def __str__(self) -> str:
        return self.url

    def __repr__(self) -> str:
        return f"ObjectPath({self.url!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ObjectPath) and other.url == self.url

    def __hash__(self) -> int:
        return hash(self.url)

    def __lt__(self, other: "ObjectPath") -> bool:
        return self.url < other.url

    @property
    def key(self) -> str:
        """bucket/key, as pyarrow's file system names it."""
        return self.url.split("://", 1)[1]

    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[-1]

    @property
    def parent(self) -> "ObjectPath":
        head = self.key.rsplit("/", 1)[0] if "/" in self.key else self.key
        return ObjectPath(f"s3://{head}")

    def with_name(self, name: str) -> "ObjectPath":
        return self.parent / name

    def resolve(self) -> "ObjectPath":
        return self

    absolute = resolve

    def _file_info(self) -> Any:
        try:
            return filesystem().get_file_info(self.key)
        except OSError as error:
            raise StoreError(f"{self.url}: {what_failed(error)}") from None

    def exists(self) -> bool:
        from pyarrow.fs import FileType

        return self._file_info().type != FileType.NotFound

    def is_dir(self) -> bool:
        from pyarrow.fs import FileType

        return self._file_info().type == FileType.Directory

    def is_file(self) -> bool:
        from pyarrow.fs import FileType

        return (self._info or self._file_info()).type == FileType.File

    def listing(self, recursive: bool = False) -> list["ObjectPath"]:
        """The objects (and, not recursive, the prefixes) under this one; [] when there are none."""
        from pyarrow.fs import FileSelector

        try:
            infos = filesystem().get_file_info(FileSelector(self.key, allow_not_found=True, recursive=recursive))
        except OSError as error:
            raise StoreError(f"{self.url}: {what_failed(error)}") from None
        return [ObjectPath(f"s3://{info.path}", info) for info in infos]

    def iterdir(self) -> Iterator["ObjectPath"]:
        return iter(self.listing())

    def stat(self) -> SimpleNamespace:
        from pyarrow.fs import FileType

        info = self._info or self._file_info()
        if info.type == FileType.NotFound:
            raise FileNotFoundError(self.url)
        mtime = info.mtime.timestamp() if info.mtime is not None else 0.0
        return SimpleNamespace(st_size=info.size or 0, st_mtime=mtime, st_mtime_ns=int(mtime * 1e9), st_ino=0)

    def read_bytes(self) -> bytes:
        with filesystem().open_input_stream(self.key) as stream:
            return stream.read()

    def read_text(self, encoding: str = "utf-8") -> str:
        return self.read_bytes().decode(encoding)

    def write_bytes(self, data: bytes) -> None:
        with filesystem().open_output_stream(self.key) as stream:
            stream.write(data)

    def unlink(self, missing_ok: bool = False) -> None:
        try:
            filesystem().delete_file(self.key)
        except FileNotFoundError:
            if not missing_ok:
                raise

    def mkdir(self, parents: bool = False, exist_ok: bool = False) -> None:
        """Nothing to do: an object store has no folders, a key's prefix is there while a key under it is."""

    def open_input_file(self) -> Any:
        return filesystem().open_input_file(self.key)
