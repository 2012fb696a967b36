"""The backend's API calls: retried when the API server cannot answer now (L5), 409/404 read as what they mean."""

from __future__ import annotations

import json
from collections.abc import Callable

from kubernetes.client import ApiException
from urllib3.exceptions import HTTPError as Urllib3Error

from catchup_assets.backends.kubernetes.names import CONTAINER
from catchup_assets.core.dispatch.ports import DispatchBlocked, TransientBackendError

# 410 Gone on a LIST: the server's window moved; listing again is the cure.
TRANSIENT = frozenset({410, 429, 500, 502, 503, 504})


class ApiCalls:
    """Mixed into KubernetesBackend: needs `ns`, `sleeper`, `api_retries`, `api_backoff`, `timeout`, `core`,
    `throttle`, `waits` (backoff.WaitBudget)."""

    def _call(self, fn: Callable, *args, read: bool = False, **kwargs):
        """Retry what the API server could not answer now (L5: never a range's failure), waiting as it
        asks within the pass's budget (backoff.py); spent, the call raises TransientBackendError.

        `read`: the call is unpreloaded and its whole body is read inside the retry, so
        a body cut off mid-read (urllib3 ProtocolError) is retried like a reset.
        """
        delay = self.api_backoff
        name = getattr(fn, "__name__", "API call")
        for attempt in range(self.api_retries + 1):
            self._throttle()
            try:
                if read:
                    return fn(*args, _request_timeout=self.timeout, _preload_content=False, **kwargs).data
                return fn(*args, _request_timeout=self.timeout, **kwargs)
            except ApiException as exc:
                if exc.status not in TRANSIENT:
                    raise
                status, retry_after = exc.status, (exc.headers or {}).get("Retry-After")
                why = f"HTTP {exc.status}" + (f" (Retry-After: {retry_after})" if retry_after else "")
            except (Urllib3Error, TimeoutError, ConnectionError) as exc:
                status, retry_after, why = None, None, f"{type(exc).__name__}: {exc}"
            if attempt == self.api_retries:
                raise TransientBackendError(f"{name}: {why}")
            # backoff.py: what the server asked, capped, from the pass's budget; the one retry layer.
            wait = self.waits.draw(status, retry_after, delay)
            if wait is None:
                policy = self.waits.policy
                raise TransientBackendError(
                    f"{name}: {why}; this pass waited {self.waits.spent:g} s of its "
                    f"{policy.api_wait_budget_seconds:g} s (api_wait_budget_seconds, each wait at most "
                    f"{policy.api_wait_cap_seconds:g} s): skipped, the next pass asks again"
                )
            self.sleeper(wait)  # injected: a stopping dispatcher's clock ends it at once
            delay *= 2
        raise AssertionError("unreachable")

    def _create(self, fn: Callable, body) -> dict | None:
        """Create; the object as the server stored it (raw JSON, no model built), None if it already exists (409).

        A 403 blocks new dispatches (every attempt would meet it), with the API server's own words: they
        name the account, the verb, the resource and the namespace the Role lacks."""
        try:
            return json.loads(self._call(fn, self.ns, body, read=True))
        except ApiException as exc:
            if exc.status == 409:
                return None
            if exc.status == 403:
                why = f"{status_message(exc)}: grant it in the mission's Role (templates/rbac.yaml)"
                raise DispatchBlocked(why) from exc
            raise

    def _delete(self, fn: Callable, name: str, **kwargs) -> None:
        try:
            self._call(fn, name, self.ns, **kwargs)
        except ApiException as exc:
            if exc.status not in (404, 410):  # already gone: what a delete wanted
                raise

    def _throttle(self) -> None:
        if self.throttle is not None:
            self.throttle.wait()  # throttle.py: the client's QPS and burst

    def _events(self, field_selector: str) -> bytes:
        """The mission namespace's events that `field_selector` picks, as the raw EventList."""
        return self._call(self.core.list_namespaced_event, self.ns, field_selector=field_selector, read=True)

    def _read_log(self, pod_name: str, since: str | None):
        """The pod's log since `since`, as a stream; retried as every call is (a 429's wait, the pass's
        budget): spent, TransientBackendError, and the final read waits for a later pass (pod_logs.py)."""
        query = [("container", CONTAINER), ("timestamps", "true")]
        if since:
            query.append(("sinceTime", since))  # the generated client has no since_time

        def read_namespaced_pod_log(_request_timeout):
            return self.core.api_client.call_api(
                "/api/v1/namespaces/{namespace}/pods/{name}/log",
                "GET",
                path_params={"namespace": self.ns, "name": pod_name},
                query_params=query,
                # As client-go asks for a stream: kube-apiserver negotiates pods/log among its serializers and
                # answers `Accept: text/plain` alone 406 (the body comes as text/plain either way).
                header_params={"Accept": "application/json, */*"},
                auth_settings=["BearerToken"],
                _preload_content=False,
                _return_http_data_only=True,
                _request_timeout=_request_timeout,
            )

        return self._call(read_namespaced_pod_log)


def status_message(exc: ApiException) -> str:
    """The `message` of the Status the API server answered, else its HTTP status line."""
    try:
        return json.loads(exc.body)["message"]
    except (TypeError, ValueError, KeyError):
        return f"HTTP {exc.status} {exc.reason}"
