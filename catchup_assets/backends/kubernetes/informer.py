"""A list-then-watch cache of one resource of the mission (issue 26 item 2), as client-go's reflector.

The first read LISTs the mission's objects (label-selected), then each read WATCHes
from the last resourceVersion seen, with `allowWatchBookmarks`, and applies the
events: ADDED/MODIFIED replace an object, DELETED drops it, BOOKMARK only moves the
resourceVersion (https://kubernetes.io/docs/reference/using-api/api-concepts/#efficient-detection-of-changes).

Why the pass polls the watch rather than a background thread streaming it: the
backend stays a plain object whose every call happens inside the pass, with its
APIs, clock and sleeper injected, so a test steps the cluster, runs a pass and sees
exactly what the server held, with no thread to race. Each poll is one watch request
that reads what the server has already queued and stops after `idle` seconds of
silence, then resumes from where it stopped on the next pass.

The idle is set on the socket once the response has begun, never as the request's read
timeout: that timeout also bounds the wait for the response's headers, and urllib3 (whose default
retries connect.py keeps for connection and read errors, its status retries off) sends a GET
whose headers timed out again, so on a loaded machine one poll became two watches. The headers get the
connect timeout; an API server flushes them as soon as the watch is registered.

What relists (the cache dropped and rebuilt from a fresh LIST): an ERROR event (a
`Status`, 410 Expired when the resourceVersion left the server's window), an HTTP
410, any 429/5xx on the watch, and a watch not answered within the connect timeout or
reset before it answered. A watch cut off mid-body or reset keeps what it
delivered and resumes from its last resourceVersion, as the reflector does; only an
expired window needs a relist. Nothing survives the process (L10): a restart lists.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

from kubernetes.client import ApiException
from urllib3.exceptions import HTTPError as Urllib3Error
from urllib3.exceptions import ReadTimeoutError

from catchup_assets.backends.kubernetes.api_calls import status_message
from catchup_assets.core.dispatch.ports import TransientBackendError

log = logging.getLogger(__name__)


class Informer:
    def __init__(
        self,
        list_fn: Callable,
        call: Callable,
        namespace: str,
        selector: str,
        model: type,
        *,
        idle: float = 0.05,
        connect_timeout: float = 30.0,
        throttle: Callable[[], None] = lambda: None,
        keep: Callable[[dict], dict] = lambda obj: obj,
    ) -> None:
        self.list_fn, self.call = list_fn, call  # call: the backend's retrying _call
        self.throttle = throttle  # a watch poll is a request too: the client's QPS counts it
        self.keep = keep  # what of each object is cached (client-go's TransformFunc)
        self.ns, self.selector, self.model = namespace, selector, model
        self.idle, self.connect_timeout = idle, connect_timeout
        self.objects: dict[str, dict] = {}  # name -> the object's JSON
        self.resource_version: str | None = None  # None: list on the next read
        self.relists = self.events = 0
        # Names this process deleted whose DELETED event has not come yet: hidden, so a
        # released object never shows again from a lagging watch (the delete half of
        # kube-controller-manager's ControllerExpectations).
        self._gone: set[str] = set()

    def read(self) -> dict[str, dict]:
        """The cache, brought up to date: a LIST the first time and after an expiry, else a watch poll."""
        if self.resource_version is None:
            self._list()
        else:
            self._poll()
            if self.resource_version is None:
                self._list()
        return self.objects

    def wrote(self, obj: dict) -> None:
        """Our own create, as the server answered it: cached before its watch event comes.

        As client-go's MutationCache: a watch poll that stopped at a pause (a busy server)
        would otherwise leave a just-created object unseen for a pass, and the dispatcher
        would submit it again, to a 409. The watch's ADDED for it is the same object.
        """
        self.objects.setdefault(obj["metadata"]["name"], self._kept(obj))

    def deleted(self, name: str) -> None:
        """Our own delete, answered: gone from the cache now, and its late events ignored."""
        self.objects.pop(name, None)
        self._gone.add(name)

    def relist(self) -> dict[str, dict]:
        """The cache listed afresh now (the caller found it behind the server)."""
        self._relist_next("the cache is behind")
        self._list()
        return self.objects

    def _list(self) -> None:
        try:
            body = json.loads(self.call(self.list_fn, self.ns, label_selector=self.selector, read=True))
        except ApiException as exc:
            if exc.status != 403:
                raise
            # Nothing is known until the Role is fixed: each pass says so, in the API server's words
            # (they name the account, the verb, the resource and the namespace), and charges nothing.
            raise TransientBackendError(f"{status_message(exc)}: grant it in the mission's Role") from exc
        listed = {o["metadata"]["name"]: self._kept(o) for o in body.get("items") or []}
        self._gone &= listed.keys()  # what the list no longer holds is gone for good
        self.objects = {name: o for name, o in listed.items() if name not in self._gone}
        self.resource_version = (body.get("metadata") or {}).get("resourceVersion")
        self.relists += 1

    def _relist_next(self, why: str) -> None:
        log.info("watch of %s: %s; listing again", self.model.__name__, why)
        self.objects, self.resource_version = {}, None

    def _poll(self) -> None:
        self.throttle()
        try:
            resp = self.list_fn(
                self.ns,
                label_selector=self.selector,
                watch=True,
                resource_version=self.resource_version,
                allow_watch_bookmarks=True,
                timeout_seconds=max(1, int(self.idle) + 1),
                _preload_content=False,
                _request_timeout=(self.connect_timeout, self.connect_timeout),
            )
            resp.connection.sock.settimeout(self.idle)  # the stream's silence; the next request sets its own
        except ApiException as exc:
            self._relist_next(f"HTTP {exc.status}")
            return
        except (Urllib3Error, TimeoutError, ConnectionError) as exc:
            # Not answered (a hung API server) or reset: the cache is not known current, so this
            # read lists, as every pass did before the informer: never a stale view.
            self._relist_next(f"not opened ({exc})")
            return
        try:
            for line in resp:
                if line.strip() and not self._apply(json.loads(line)):
                    return
        except ReadTimeoutError:
            pass  # silence for `idle`: everything queued has been read
        except (Urllib3Error, ConnectionError, ValueError) as exc:
            # Cut off or reset mid-stream (a partial last line fails to decode): keep what arrived.
            log.info("watch of %s cut off (%s); resumed next pass", self.model.__name__, exc)
        finally:
            resp.close()
            resp.release_conn()

    def _apply(self, event: dict) -> bool:
        """Apply one watch event; False when the watch must end (an ERROR: relist)."""
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            self._relist_next(f"ERROR {obj.get('code')} {obj.get('reason')}: {obj.get('message')}")
            return False
        meta = obj.get("metadata") or {}
        self.events += 1
        if meta.get("name") in self._gone:
            if kind == "DELETED":
                self._gone.discard(meta["name"])
        elif kind in ("ADDED", "MODIFIED"):
            self.objects[meta["name"]] = self._kept(obj)
        elif kind == "DELETED":
            self.objects.pop(meta["name"], None)
        self.resource_version = meta.get("resourceVersion") or self.resource_version
        return True

    def _kept(self, obj: dict) -> dict:
        """The object as cached: what `keep` leaves, and never `managedFields`, which a real API
        server sends on every object and nothing here reads (client-go: `TransformStripManagedFields`)."""
        kept = self.keep(obj)  # first: `keep` may note who made it (observe.kept_job) before they go
        kept.get("metadata", {}).pop("managedFields", None)
        return kept
