"""The console's routes: HTML pages, the JSON API they poll, and the one write, a control change.

Every mission name and range key is checked where it enters, before any path is made of it
(validate_mission, parse_key): a bad one is a 400 naming it, an unknown one a 404. Each read of
the storage root runs on a worker thread, bounded in number (`READERS`) and shared by the requests
that ask for the same figures meanwhile (console/shared_reads.py); a request waits `READ_SECONDS`
for it, then a slow or hung root answers 503, never holding the server's loop. A control
change is the CLI's (mission/control.py set_control): the same checks, the same compare-and-swap,
the cap named in any refusal; only who made it differs (`console:...`).
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable
from functools import partial
from importlib.resources import files

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from catchup_assets.console import figures
from catchup_assets.console.auth import refuse_write
from catchup_assets.console.pages import Pages
from catchup_assets.console.shared_reads import SharedReads
from catchup_assets.core.dispatch.mission_control import ACTIONS, check_who
from catchup_assets.core.dispatch.ports import LiveLogs, LogUnavailable
from catchup_assets.core.errors import ConfigError, StateError
from catchup_assets.core.plan.config import validate_mission
from catchup_assets.core.values.ledger_range import parse_key
from catchup_assets.mission.control import set_control
from catchup_assets.mission.saved import mission_cap
from catchup_assets.store.root import Store

READERS = 8  # storage reads at once; more wait their turn
READ_SECONDS = 30.0  # a request waits this long for its figures, then 503 (the read runs on for the next poll)
FRESH_SECONDS = 1.0  # figures read this recently are served as they are: the pages poll every 1.5 s
STOP = "stop"  # not a control record change: the mission's Dagster run is terminated (console_app's `stop`)
STOP_UNAVAILABLE = (
    "unavailable: this console was started without --dagster-url, so it cannot reach Dagster to terminate "
    "the mission's run; stop it from the run's page in the Dagster UI"
)
MAX_BODY_BYTES = 4096  # a control change is a few dozen bytes
SCRIPT = files("catchup_assets.console").joinpath("console.js").read_bytes()
SECURITY_HEADERS = {
    # Nothing of ours runs but our own script; no frame can hold the page (clickjacking of its buttons).
    "content-security-policy": "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "connect-src 'self'; img-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}


class FiniteJSON(JSONResponse):
    """JSON whose non-finite numbers (a hand-edited record's NaN) are null: Starlette's encoder refuses
    them (allow_nan=False), which would turn one bad figure into a 500 for the whole page."""

    def render(self, content) -> bytes:
        return super().render(_finite(content))


def _finite(value):
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


class Refused(Exception):
    def __init__(self, status: int, error: str, **extra) -> None:
        super().__init__(error)
        self.status, self.error, self.extra = status, error, extra


def _mission(request: Request) -> str:
    name = request.path_params["mission"]
    try:
        return validate_mission(name)
    except ConfigError as exc:
        raise Refused(400, f"mission: {exc}") from None


def _range(request: Request) -> str:
    try:
        return parse_key(request.path_params["key"]).key
    except ConfigError as exc:
        raise Refused(400, f"range: {exc}") from None


def console_app(
    root: str,
    token: str | None = None,
    clock: Callable[[], float] = time.time,
    live_logs: Callable[[str], LiveLogs] | None = None,
    stop: Callable[[str], object] | None = None,
    dagster_url: str | None = None,
    public_url: str | None = None,
) -> Starlette:
    """The console over storage root `root`; writes allowed only with `token` (None: read-only).
    `live_logs`: a mission's backend, for a running attempt's log (None: archived logs only); made
    once per mission, on the first range page that asks. `stop(mission)`: ends the mission's live
    Dagster runs (defs/mission/run_stop.py), its answer's `.runs` the run ids, `.where` the webserver;
    None: Stop is refused, saying why. `dagster_url`: the Dagster UI a range links to. `public_url`: scheme://host the
    console is reached at through a TLS-terminating proxy, the origin a write must come from."""
    reads = SharedReads(READERS, FRESH_SECONDS, READ_SECONDS)
    backends: dict[str, LiveLogs] = {}
    backends_lock = threading.Lock()  # range reads run on worker threads: one backend per mission

    def range_figures(name: str, key: str) -> dict:
        live = None
        if live_logs is not None:
            with backends_lock:
                live = backends.get(name) or backends.setdefault(name, live_logs(name))
        return figures.range_figures(root, name, key, live)

    pages = Pages(read_only=token is None, stop_unavailable=None if stop is not None else STOP_UNAVAILABLE)

    async def read(key: tuple, fn, *args, now: bool = False):
        """`fn(*args)` (with the clock's time last, if `now`), shared by every request for `key` meanwhile."""
        call = (lambda: fn(*args, clock())) if now else partial(fn, *args)
        try:
            return await reads.get(key, call)
        except TimeoutError:
            raise Refused(503, f"the storage root did not answer within {READ_SECONDS:g} s") from None
        except figures.NotFound as exc:
            raise Refused(404, str(exc)) from None
        except LogUnavailable as exc:  # the backend could not be asked (its API refused): said, not a 500
            raise Refused(503, str(exc)) from None
        except (ConfigError, StateError) as exc:
            raise Refused(422, str(exc)) from None
        except OSError as exc:
            raise Refused(503, f"the storage root cannot be read: {exc}") from None

    def answer(make, render: Callable[[dict], str] | None = None):
        """An endpoint serving `make(request)`'s figures as JSON, or as HTML through `render`."""

        async def endpoint(request: Request) -> Response:
            try:
                data = await make(request)
            except Refused as exc:
                body = {"error": exc.error, **exc.extra}
                if render is not None:
                    return HTMLResponse(pages.error(exc.status, exc.error), exc.status, SECURITY_HEADERS)
                return FiniteJSON(body, exc.status, SECURITY_HEADERS)
            if render is not None:
                return HTMLResponse(render(data), 200, SECURITY_HEADERS)
            return FiniteJSON(data, 200, SECURITY_HEADERS)

        return endpoint

    async def missions(request: Request) -> dict:
        listed = await read(("missions",), figures.missions, root, now=True)
        return {"root": root, "read_only": token is None, "missions": listed}

    async def mission(request: Request) -> dict:
        name = _mission(request)
        return {
            "read_only": token is None,
            "stop": {"available": stop is not None, "why": None if stop is not None else STOP_UNAVAILABLE},
            **await read(("mission", name), figures.mission_figures, root, name, now=True),
        }

    async def range_(request: Request) -> dict:
        name, key = _mission(request), _range(request)
        figs = await read(("range", name, key), range_figures, name, key)
        return {
            "read_only": token is None,
            **figs,
            "dagster": figures.dagster_links(dagster_url, key, figs["attempts"]),
        }

    async def control(request: Request) -> Response:
        try:
            name = _mission(request)
            refusal = refuse_write(request.headers, public_url or _own_origin(request), token)
            if refusal is not None:
                raise Refused(refusal.status, refusal.error)
            action, value, who = _control_body(await _body(request))
            if action == STOP:
                return await stop_mission(name)
            cap = await read(("cap", name), _cap, root, name)
            change = partial(set_control, root, name, action, value, who=f"console:{who}", now=clock())
            try:
                await reads.run(change)
            except TimeoutError:
                raise Refused(503, f"the storage root did not answer within {READ_SECONDS:g} s") from None
            except (ConfigError, StateError) as exc:  # refused with nothing written: named, with the cap
                raise Refused(422, str(exc), cap=cap) from None
            except OSError as exc:  # ControlConflict among them: others changed it under every try
                raise Refused(409, f"not changed, try again: {exc}") from None
            finally:  # whatever came of it, the next poll reads the record afresh
                reads.forget(lambda key: key == ("missions",) or (len(key) > 1 and key[1] == name))
            figs = await read(("mission", name), figures.mission_figures, root, name, now=True)
        except Refused as exc:
            return FiniteJSON({"error": exc.error, **exc.extra}, exc.status, SECURITY_HEADERS)
        return FiniteJSON({"read_only": False, **figs}, 200, SECURITY_HEADERS)

    async def stop_mission(name: str) -> Response:
        await read(("cap", name), _cap, root, name)  # an unknown mission is a 404 before Dagster is asked
        if stop is None:
            raise Refused(409, f"stop: {STOP_UNAVAILABLE}")
        try:
            stopped = await reads.run(partial(stop, name))
        except TimeoutError:
            raise Refused(503, f"stop: the Dagster webserver did not answer within {READ_SECONDS:g} s") from None
        except Exception as exc:  # noqa: BLE001 - run_stop's StopUnavailable or its transport's: said, not a 500
            raise Refused(502, f"stop: {exc}") from None
        finally:
            reads.forget(lambda key: key == ("missions",) or (len(key) > 1 and key[1] == name))
        runs = list(stopped.runs)
        if not runs:
            raise Refused(409, f"stop: mission {name} has no live run in Dagster at {stopped.where} to terminate")
        return FiniteJSON({"mission": name, "action": STOP, "terminated": runs}, 200, SECURITY_HEADERS)

    async def script(request: Request) -> Response:
        return Response(SCRIPT, 200, SECURITY_HEADERS, media_type="text/javascript")

    async def no_icon(request: Request) -> Response:
        return Response(status_code=204, headers=SECURITY_HEADERS)  # a browser asks; not a 404 in its console

    routes = [
        Route("/", answer(missions, pages.missions)),
        Route("/missions/{mission}", answer(mission, pages.mission)),
        Route("/missions/{mission}/ranges/{key}", answer(range_, pages.range_)),
        Route("/api/missions", answer(missions)),
        Route("/api/missions/{mission}", answer(mission)),
        Route("/api/missions/{mission}/ranges/{key}", answer(range_)),
        Route("/api/missions/{mission}/control", control, methods=["POST"]),
        Route("/console.js", script),
        Route("/favicon.ico", no_icon),
    ]
    return Starlette(routes=routes)


def _cap(root: str, mission: str) -> dict:
    store = Store(root)
    figures.require_mission(store, mission)
    cap = mission_cap(store, mission)
    return {"limit": cap.limit, "where": cap.where}


def _own_origin(request: Request) -> str:
    """scheme://host as the client addressed this console (its Host header), what its own page's Origin is."""
    return f"{request.url.scheme}://{request.headers.get('host', '')}"


async def _body(request: Request) -> bytes:
    """The request's body, at most MAX_BODY_BYTES, as JSON (a cross-site form cannot send that type)."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/json":
        raise Refused(415, "body: send application/json")
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > MAX_BODY_BYTES):
        raise Refused(413, f"body: at most {MAX_BODY_BYTES} bytes")
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise Refused(413, f"body: at most {MAX_BODY_BYTES} bytes")
    return body


def _control_body(body: bytes) -> tuple[str, int | None, str]:
    """(action, value, who) from `{"action": ..., "value": N, "who": ...}`; Refused 400 naming the field."""

    def no_constant(name: str):
        raise ValueError(f"{name} is not a number JSON allows")

    try:
        doc = json.loads(body, parse_constant=no_constant)
    except (ValueError, RecursionError) as exc:
        raise Refused(400, f"body: not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise Refused(400, 'body: a JSON object {"action": ..., "value": N}')
    unknown = sorted(set(doc) - {"action", "value", "who"})
    if unknown:
        raise Refused(400, f"body: unknown field {unknown[0]!r}")
    action, value = doc.get("action"), doc.get("value")
    if action not in (*ACTIONS, STOP):
        raise Refused(400, f"action: {action!r} is not one of {', '.join((*ACTIONS, STOP))}")
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)  # 4.0 is the 4 a form's number field sends
    try:
        who = check_who(doc.get("who", "operator"), "who")
    except ConfigError as exc:
        raise Refused(400, str(exc)) from None
    return action, value, who
