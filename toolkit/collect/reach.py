"""Whether an endpoint can be connected to at all, asked before a collection touches the store.

A URL nobody listens on, or a host name that does not resolve, is a mistake in the command, not a
provider having a bad moment: retrying it only delays the message, and a run started against it
would leave a runs row (and a dataset, a lock file, a journal folder) for nothing. So each endpoint
with calls due is connected to once (TCP only: nothing is sent) before anything is written.
Endpoints reached through a proxy are not checked (the proxy, not the endpoint, would answer).
"""

from __future__ import annotations

import socket
import urllib.parse
import urllib.request

from toolkit.collect.batch_state import load_state
from toolkit.collect.client import EndpointFatal
from toolkit.collect.plan import make_plan, read_stored_work
from toolkit.store import Store

CHECK_TIMEOUT_S = 5.0  # a host that drops the connection attempt is left to the calls' own timeout and retries


class EndpointUnreachable(EndpointFatal):
    """Nothing can be connected to at an endpoint with calls due; raised before the store is touched."""


def unreachable(base_url: str, timeout: float = CHECK_TIMEOUT_S) -> str | None:
    """'connection refused' or 'name not resolved' when ``base_url`` certainly cannot be reached; None
    when it can, or when that cannot be told here (a proxy, a timeout, a URL the SDK will judge)."""
    try:
        parts = urllib.parse.urlsplit(base_url)
        host, port = parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    if not host or parts.scheme not in ("http", "https") or _proxied(parts.scheme, host):
        return None
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except ConnectionRefusedError:
        return "connection refused"
    except socket.gaierror:
        return "name not resolved"
    except OSError:
        return None


def _proxied(scheme: str, host: str) -> bool:
    proxies = urllib.request.getproxies_environment()
    if not (proxies.get(scheme) or proxies.get("all")):
        return False
    return not urllib.request.proxy_bypass_environment(host, proxies)


def refuse_unreachable(store: Store, jobs: list, timeout: float = CHECK_TIMEOUT_S) -> None:
    """EndpointUnreachable naming the URL when an endpoint that a job has calls due at cannot be
    connected to. Reads only; the stored work is read only for an endpoint that failed the check."""
    verdicts: dict[str, str | None] = {}
    for job in jobs:
        s = job.settings
        roles = [("answer", s.answer_endpoint)] if job.answer and s.answer_endpoint is not None else []
        for role, endpoint in [*roles, ("judge", s.judge_endpoint)]:
            url = endpoint.base_url
            if url not in verdicts:
                verdicts[url] = unreachable(url, min(timeout, s.retry.timeout_s))
            if verdicts[url] is not None and _calls_due(store, job, role):
                endpoint.api_key(role)  # a missing key is said first, as when the endpoint is up
                raise EndpointUnreachable(f"cannot connect to {url}: {verdicts[url]}")


def _calls_due(store: Store, job, role: str) -> bool:
    """Whether collecting ``job`` would call its ``role`` endpoint (as ``ClientPool.for_job`` decides)."""
    s = job.settings
    folder = store.journal_dir(s.run_id)
    if folder.is_dir() and load_state(folder) is not None:
        return True  # a batch in flight is asked about
    plan = make_plan(list(job.cases), read_stored_work(store, s.run_id, journal=True), s.judge_model,
                     s.judge_passes, job.answer, s.answer_samples, s.run_id)
    return bool(plan.to_answer) if role == "answer" else bool(plan.to_answer or plan.to_judge)
