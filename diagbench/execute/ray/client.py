"""The one module that talks to a Ray cluster from the controller: Ray's job server, over its
REST API (`/api/jobs/`, the API `ray job submit` and the Python JobSubmissionClient use).

Plain HTTP with a deadline on every request: an address that never answers is a clear error
in seconds, never a hang (the Python SDK sets no timeout), and the controller needs no `ray`
package at all, nor the cluster's exact Ray version. Everything above it sees a typed
`RayJob` and `RayError`s carrying Ray's own words.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from diagbench.errors import UserError

__all__ = ["ACTIVE", "RayClient", "RayError", "RayJob", "RayRejected", "RayUnavailable", "dashboard_url"]

REQUEST_TIMEOUT_S = 15.0  # a busy head answers within seconds; none that never answers is waited on longer
ACTIVE = frozenset({"PENDING", "RUNNING"})  # Ray's job states a job can still leave on its own
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*://", re.IGNORECASE)


class RayError(UserError):
    """Ray's job server could not be used."""


class RayUnavailable(RayError):
    """The address does not answer as a Ray job server."""


class RayRejected(RayError):
    """The job server refused a job (a bad runtime_env, resources it can never have): Ray's words."""


@dataclass(frozen=True)
class RayJob:
    """What Ray says of one job (its submission id is the id diagbench knows it by)."""

    job_id: str
    state: str  # Ray's word: PENDING, RUNNING, STOPPED, SUCCEEDED, FAILED
    reason: str = ""  # Ray's message, one line ("" for none)
    node: str = ""  # the node the entrypoint (the worker) runs on: Ray's node id
    limit: str = ""  # Ray has no time limit for jobs
    metadata: Mapping[str, str] | None = None
    exit_code: int | None = None

    @property
    def active(self) -> bool:
        return self.state in ACTIVE

    @property
    def running(self) -> bool:
        return self.state == "RUNNING"

    def describe(self) -> str:
        return f"{self.state} ({self.reason})" if self.reason else self.state

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RayJob:
        message = " ".join(str(data.get("message") or "").split())
        code = data.get("driver_exit_code")
        return cls(
            job_id=str(data.get("submission_id") or data.get("job_id") or ""),
            state=str(data.get("status") or "UNKNOWN"),
            reason=message[:300],
            node=str(data.get("driver_node_id") or ""),
            metadata={str(k): str(v) for k, v in (data.get("metadata") or {}).items()},
            exit_code=code if isinstance(code, int) else None,
        )


def dashboard_url(address: str) -> str:
    """The job server's base URL: `head:8265` and `http://head:8265/` alike; a Ray Client or
    GCS address (`ray://head:10001`, `auto`) is a mistake with a fix."""
    address = address.strip().rstrip("/")
    if address.startswith("ray://") or address == "auto" or not address:
        raise RayUnavailable(
            f"--ray-address {address or '(empty)'}: give the Ray dashboard's address, where jobs are submitted "
            "(http://HEAD:8265; on KubeRay the head service's dashboard port)"
        )
    return address if _SCHEME.match(address) else f"http://{address}"


class RayClient:
    """Ray's job server at one address."""

    def __init__(self, address: str, timeout_s: float = REQUEST_TIMEOUT_S):
        self.url = dashboard_url(address)
        self.http = httpx.Client(base_url=self.url, timeout=timeout_s, trust_env=False)

    def close(self) -> None:
        self.http.close()

    def version(self) -> str:
        """The cluster's Ray version; RayUnavailable if the address is no Ray job server."""
        data = self._json("GET", "/api/version", what="ask the Ray version")
        if not isinstance(data, dict) or "ray_version" not in data:
            raise RayUnavailable(f"{self.url} answered, but not as a Ray dashboard (no /api/version)")
        return str(data["ray_version"])

    def submit(self, body: Mapping[str, Any]) -> str:
        """Submit a job (`entrypoint`, `submission_id`, `runtime_env`, `metadata`, resources);
        its submission id, or RayRejected with Ray's words."""
        data = self._json("POST", "/api/jobs/", json=dict(body), what="submit a job")
        if not isinstance(data, dict) or not data.get("submission_id"):
            raise RayRejected(f"the job server took the job but named none: {str(data)[:200]}")
        return str(data["submission_id"])

    def job(self, job_id: str) -> RayJob | None:
        """The job's state; None when the server cannot say now (ask again later)."""
        try:
            data = self._json("GET", f"/api/jobs/{job_id}", what="ask for a job")
        except RayError:
            return None
        return RayJob.from_json(data) if isinstance(data, dict) else None

    def jobs(self) -> list[RayJob] | None:
        """Every job the cluster knows; None when it cannot say now."""
        try:
            data = self._json("GET", "/api/jobs/", what="list the jobs")
        except RayError:
            return None
        return [RayJob.from_json(j) for j in data if isinstance(j, dict)] if isinstance(data, list) else None

    def stop(self, job_id: str) -> None:
        """Ray's own stop: SIGTERM to the entrypoint's tree, SIGKILL a few seconds later."""
        try:
            self._json("POST", f"/api/jobs/{job_id}/stop", what="stop a job")
        except RayError:
            return  # ended meanwhile, or the head is busy: the follower asks again

    def logs(self, job_id: str) -> str:
        """What the job's entrypoint wrote (the worker's own output, not the server's log)."""
        try:
            data = self._json("GET", f"/api/jobs/{job_id}/logs", what="read a job's output")
        except RayError:
            return ""
        return str(data.get("logs") or "") if isinstance(data, dict) else ""

    def _json(self, method: str, path: str, what: str, json: Any = None) -> Any:
        try:
            answer = self.http.request(method, path, json=json)
        except httpx.TimeoutException:
            raise RayUnavailable(
                f"the Ray job server at {self.url} did not answer within {self.http.timeout.read:g}s "
                f"(to {what}): is the address the dashboard's, and is the head up?"
            ) from None
        except httpx.HTTPError as exc:
            raise RayUnavailable(f"cannot reach the Ray job server at {self.url} (to {what}): {exc}") from None
        if answer.status_code >= 400:
            words = " ".join(answer.text.split())[:400] or answer.reason_phrase
            error = RayRejected if method == "POST" and answer.status_code < 500 else RayError
            raise error(f"Ray's job server refused to {what}: {words} (HTTP {answer.status_code})")
        try:
            return answer.json()
        except ValueError:
            raise RayUnavailable(f"{self.url} answered {what} with something other than JSON") from None
