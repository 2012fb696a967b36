// The console's live updates: poll this page's JSON every POLL_MS and write what changed.
// Every value is set as text (textContent, title, className): nothing from a record, key or log
// line is ever parsed as HTML. The token for writes is the operator's, pasted once, kept in this
// tab's sessionStorage and sent as Authorization: Bearer on each control change.
"use strict";

const POLL_MS = 1500;
const page = document.body.dataset.page;
const api = document.body.dataset.api;

function at(obj, path) {
  return path.split(".").reduce((o, k) => (o == null ? undefined : o[k]), obj);
}

function utc(epoch) {
  if (epoch == null) return "-";
  return new Date(epoch * 1000).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

function size(n) {
  if (n == null) return "-";
  for (const [unit, scale] of [["GiB", 1024 ** 3], ["MiB", 1024 ** 2], ["KiB", 1024]]) {
    if (n >= scale) return (n / scale).toFixed(2) + " " + unit;
  }
  return n + " B";
}

function duration(s) {
  if (s == null) return "-";
  if (s >= 3600) return (s / 3600).toFixed(1) + " h";
  return s >= 60 ? Math.round(s / 60) + " min" : Math.round(s) + " s";
}

function cell(row, text) {
  const td = document.createElement("td");
  td.textContent = text == null ? "-" : String(text);
  row.appendChild(td);
  return td;
}

function link(href, text) {
  const a = document.createElement("a");
  a.href = href;
  a.textContent = text;
  return a;
}

function fields(data) {
  for (const el of document.querySelectorAll("[data-field]")) {
    const v = at(data, el.dataset.field);
    if (v === undefined) continue;
    el.textContent = el.dataset.format === "utc" ? utc(v) : String(v);
  }
}

function stateClass(state) {
  return "cell s-" + state.replace(/ /g, "-");
}

const render = {
  missions(data) {
    const body = document.getElementById("missions");
    body.replaceChildren();
    for (const m of data.missions) {
      const row = document.createElement("tr");
      cell(row, "").appendChild(link("/missions/" + encodeURIComponent(m.mission), m.mission));
      cell(row, m.phase);
      if (m.phase === "unreadable") {
        const why = cell(row, m.error);
        why.colSpan = 5;
        why.className = "error";
        body.appendChild(row);
        continue;
      }
      cell(row, m.done + " / " + m.total);
      cell(row, m.condemned);
      cell(row, m.to_go.line);
      cell(row, utc(m.started_at));
      cell(row, m.cost_so_far);
      body.appendChild(row);
    }
  },
  mission(data) {
    fields(data);
    const grid = document.getElementById("grid");
    const base = "/missions/" + encodeURIComponent(data.mission) + "/ranges/";
    if (grid.children.length !== data.ranges.length) {
      grid.replaceChildren(...data.ranges.map(([key]) => link(base + encodeURIComponent(key), "")));
    }
    data.ranges.forEach(([key, state], i) => {
      const a = grid.children[i];
      const cls = stateClass(state);
      if (a.className !== cls) a.className = cls;
      const title = key + ": " + state;
      if (a.title !== title) a.title = title;
    });
    const history = document.getElementById("history");
    history.replaceChildren();
    for (const c of data.control.history.slice().reverse()) {
      const row = document.createElement("tr");
      cell(row, utc(c.at));
      cell(row, c.who);
      cell(row, c.value == null ? c.action : c.action + " " + c.value);
      history.appendChild(row);
    }
    document.getElementById("parallelism").max = data.cap.limit;
  },
  range(data) {
    fields(data);
    const body = document.getElementById("attempts");
    body.replaceChildren();
    for (const a of data.attempts) {
      const row = document.createElement("tr");
      cell(row, a.attempt);
      cell(row, a.outcome != null ? a.outcome : a.done ? "ended, unrecorded" : "in flight");
      for (const v of [a.reason, a.node, a.tier]) cell(row, v || "-");
      for (const v of [a.memory_request_bytes, a.memory_limit_bytes, a.peak_anon_bytes, a.peak_working_set_bytes])
        cell(row, size(v));
      cell(row, duration(a.seconds));
      cell(row, utc(a.started_at));
      body.appendChild(row);
    }
    const log = data.log;
    const note = document.querySelector('[data-field="log.note"]');
    if (note) {
      note.textContent = log.unavailable || (log.source ? "archived at " + log.source + " (its last lines)" : "no log yet");
    }
    const text = log.lines.map((l) => l + "\n").join("");
    const pre = document.getElementById("log");
    if (pre.textContent !== text) pre.textContent = text;
  },
};

async function poll() {
  const live = document.getElementById("live");
  try {
    const answer = await fetch(api, { headers: { Accept: "application/json" }, cache: "no-store" });
    const data = await answer.json();
    if (!answer.ok) throw new Error(data.error || answer.status);
    render[page](data);
    live.hidden = true;
  } catch (err) {
    live.textContent = "not updating: " + err.message;
    live.hidden = false;
  }
}

function controls() {
  const form = document.getElementById("controls");
  if (!form) return;
  const token = document.getElementById("token");
  const result = document.getElementById("control-result");
  token.value = sessionStorage.getItem("catchup-console-token") || "";
  token.addEventListener("change", () => sessionStorage.setItem("catchup-console-token", token.value));
  for (const button of form.querySelectorAll("button[data-action]")) {
    button.addEventListener("click", async () => {
      const action = button.dataset.action;
      if (button.dataset.confirm && !window.confirm(button.dataset.confirm)) return;
      const body = { action };
      if (action === "parallelism") body.value = Number(document.getElementById("parallelism").value);
      result.className = "";
      result.textContent = action + "...";
      try {
        const answer = await fetch("/api/missions/" + encodeURIComponent(form.dataset.mission) + "/control", {
          method: "POST",
          headers: { "Content-Type": "application/json", Authorization: "Bearer " + token.value },
          body: JSON.stringify(body),
        });
        const data = await answer.json();
        if (!answer.ok) {
          result.className = "error";
          result.textContent = "refused (" + answer.status + "): " + data.error;
          return;
        }
        if (action === "stop") {
          result.textContent = "stop sent to Dagster: run " + data.terminated.join(", ") + " terminating (reads Canceled once its attempts are stopped)";
          return;
        }
        result.textContent = action + " written; every dispatcher of the mission obeys it within two passes";
        render.mission(data);
      } catch (err) {
        result.className = "error";
        result.textContent = "not sent: " + err.message;
      }
    });
  }
}

if (render[page]) {
  controls();
  setInterval(poll, POLL_MS);
}
