"""The console's HTML: Jinja2 templates (console/page_templates/) with autoescaping on for every value.

Everything a page shows of a record, a key or a log line is text: Jinja2 escapes it, and the
page's script (console.js) only ever sets textContent. The first paint is the server's, so a
page reads whole without JavaScript; the script then polls the same figures as JSON.
"""

from __future__ import annotations

import time

from jinja2 import Environment, PackageLoader, StrictUndefined


def utc(epoch: float | None) -> str:
    return "-" if epoch is None else time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(epoch))


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.0f} min" if seconds >= 60 else f"{seconds:.0f} s"


def size(n: int | None) -> str:
    """Bytes in the largest unit that keeps a whole number in front (a simulated peak is KiB)."""
    if n is None:
        return "-"
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} B"


def css_state(state: str) -> str:
    """A range state as a CSS class: `not started` -> `s-not-started`."""
    return "s-" + state.replace(" ", "-")


class Pages:
    def __init__(self, read_only: bool, stop_unavailable: str | None = None) -> None:
        self.env = Environment(
            loader=PackageLoader("catchup_assets.console", "page_templates"),
            autoescape=True,  # every template, whatever its name: nothing of a record is markup
            undefined=StrictUndefined,  # a missing figure is a bug to see, not an empty cell
        )
        self.env.filters.update(utc=utc, duration=duration, size=size, css_state=css_state)
        self.env.globals["read_only"] = read_only
        self.env.globals["stop_available"] = stop_unavailable is None
        self.env.globals["stop_unavailable"] = stop_unavailable or ""

    def _render(self, name: str, **context) -> str:
        return self.env.get_template(name).render(**context)

    def missions(self, data: dict) -> str:
        return self._render("missions.html", page="missions", api="/api/missions", **data)

    def mission(self, data: dict) -> str:
        api = f"/api/missions/{data['mission']}"
        return self._render("mission.html", page="mission", api=api, m=data)

    def range_(self, data: dict) -> str:
        api = f"/api/missions/{data['mission']}/ranges/{data['range']}"
        return self._render("range.html", page="range", api=api, r=data)

    def error(self, status: int, error: str) -> str:
        return self._render("error.html", page="error", api="", status=status, error=error)
