// outbox console (docs/CONSOLE.md): a small single-page app over the /ops and
// /v1 JSON endpoints of `outbox serve`. Every value reaches the page through
// textContent or an attribute set by the DOM API, never as HTML, so an event
// payload (untrusted input) always shows as text.
"use strict";

const TOKEN_KEY = "outbox.token";
const REFRESH_MS = 5000;
let refreshTimer = null;
let pageSerial = 0;  // a navigation cancels the previous page's async work

// ---- DOM ---------------------------------------------------------------------------

// h("tag.class#id", {attr: value, onclick: fn}, child...) — children are
// nodes or strings (text nodes); null/undefined/false are skipped.
function h(spec, attrs, ...children) {
  const m = /^([a-z0-9]+)((?:[.#][\w-]+)*)$/i.exec(spec);
  const el = document.createElement(m ? m[1] : "div");
  if (m && m[2]) {
    for (const part of m[2].match(/[.#][\w-]+/g)) {
      if (part[0] === ".") el.classList.add(part.slice(1));
      else el.id = part.slice(1);
    }
  }
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}
function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}
function main() { return document.getElementById("main"); }
function show(...nodes) { const m = main(); m.replaceChildren(); append(m, nodes); }
function fmtNum(n) { return n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US"); }
function fmtMs(n) { return n === null || n === undefined ? "–" : `${Number(n).toLocaleString("en-US", {maximumFractionDigits: 1})} ms`; }
function fmtSecs(s) {
  if (!s) return "0 s";
  if (s < 60) return `${s.toFixed(1)} s`;
  if (s < 3600) return `${(s / 60).toFixed(1)} min`;
  return `${(s / 3600).toFixed(1)} h`;
}
function fmtTime(t) { return t ? t.replace("T", " ").replace(/\.\d+Z$/, "Z") : "–"; }
function pill(text, kind) { return h(`span.pill${kind ? "." + kind : ""}`, {}, text); }
function statusPill(status) {
  const kind = {COMPLETED: "ok", DEAD: "bad", RETRY: "warn", PENDING: "warn", REDRIVEN: "ok",
                REDRIVING: "warn", RESOLVED: "ok", DEAD_LETTER: "bad"}[String(status).toUpperCase()];
  return pill(status, kind);
}
function link(href, text) { return h("a", {href}, text); }
function hashFor(page, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) if (v !== undefined && v !== null && v !== "") q.set(k, v);
  const s = q.toString();
  return `#/${page}${s ? "?" + s : ""}`;
}

// ---- API ---------------------------------------------------------------------------

class HttpError extends Error {
  constructor(status, body) {
    super(body && body.error ? body.error.message : `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

async function api(path, options = {}) {
  const headers = {"Accept": "application/json"};
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers["Authorization"] = `Bearer ${token}`;
  const init = {method: options.method || "GET", headers, cache: "no-store"};
  if (options.body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(options.body);
  }
  const res = await fetch(path, init);
  let body = null;
  try { body = await res.json(); } catch (e) { body = null; }
  if (res.status === 401) {
    // A refused token is forgotten at its first refusal, so the other
    // requests of the same page (still in flight) find it gone and leave the
    // form alone: a form the user is typing into is never replaced. A refusal
    // of a token the user has since replaced must not bring the form back.
    if (sessionStorage.getItem(TOKEN_KEY) === token) {
      if (token) sessionStorage.removeItem(TOKEN_KEY);
      signIn(token ? "The token was not accepted." : "");
    }
    throw new HttpError(401, body);
  }
  if (!res.ok) throw new HttpError(res.status, body);
  return body;
}

function errorBanner(err) {
  return h("div.banner.bad.error-banner", {role: "alert"}, `Error: ${err.message}`);
}

// ---- sign-in (the /ops bearer token, kept in this tab's session storage) -----------

function signIn(message) {
  // Already asking, and for the same reason: keep the form and what is typed.
  const shown = document.getElementById("signin");
  if (shown) {
    const err = document.getElementById("signin-error");
    if ((err ? err.textContent : "") === message) return;
  }
  stopRefresh();
  pageSerial++;
  document.getElementById("sign-out").hidden = true;
  const input = h("input#signin-token", {type: "password", autocomplete: "off", placeholder: "ops.token", required: true});
  const form = h("form#signin.signin", {
    onsubmit: (ev) => {
      ev.preventDefault();
      sessionStorage.setItem(TOKEN_KEY, input.value.trim());
      route();
    },
  },
  h("h1", {}, "Sign in"),
  h("p.muted", {}, "This server requires its bearer token (ops.token). It is kept in this tab only and sent as the Authorization header."),
  message ? h("div.banner.bad#signin-error", {}, message) : null,
  h("label", {for: "signin-token"}, "Token"), input,
  h("button#signin-submit", {type: "submit"}, "Sign in"));
  show(form);
  input.focus();
}

// ---- charts (inline SVG) -------------------------------------------------------------

const COLORS = ["#1f5f8b", "#d9822b", "#1e7d45", "#b3261e"];

function chart(title, points, series, unit) {
  const W = 420, H = 140, L = 44, B = 18, T = 8, R = 8;
  const svgNs = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(svgNs, "svg");
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  svg.setAttribute("preserveAspectRatio", "none");
  const el = (name, attrs, text) => {
    const n = document.createElementNS(svgNs, name);
    for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, String(v));
    if (text !== undefined) n.textContent = text;
    svg.appendChild(n);
    return n;
  };
  let max = 0;
  for (const p of points) for (const s of series) if (p[s.key] !== null && p[s.key] !== undefined) max = Math.max(max, p[s.key]);
  if (max <= 0) max = 1;
  el("line", {x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: "#c4ccd5"});
  el("line", {x1: L, y1: T, x2: L, y2: H - B, stroke: "#c4ccd5"});
  el("text", {x: L - 4, y: T + 8, "text-anchor": "end", "font-size": 10, fill: "#5c6b7a"}, fmtNum(Math.round(max * 10) / 10));
  el("text", {x: L - 4, y: H - B, "text-anchor": "end", "font-size": 10, fill: "#5c6b7a"}, "0");
  if (points.length) {
    el("text", {x: L, y: H - 4, "font-size": 10, fill: "#5c6b7a"}, fmtTime(points[0].at).slice(11, 19));
    el("text", {x: W - R, y: H - 4, "text-anchor": "end", "font-size": 10, fill: "#5c6b7a"}, fmtTime(points[points.length - 1].at).slice(11, 19));
  }
  const n = Math.max(points.length - 1, 1);
  series.forEach((s, i) => {
    const coords = [];
    points.forEach((p, k) => {
      const v = p[s.key];
      if (v === null || v === undefined) return;
      coords.push(`${(L + (W - L - R) * k / n).toFixed(1)},${(H - B - (H - B - T) * v / max).toFixed(1)}`);
    });
    if (coords.length > 1) el("polyline", {points: coords.join(" "), fill: "none", stroke: COLORS[i], "stroke-width": 1.6});
    if (coords.length < 30) {
      for (const c of coords) {
        const [x, y] = c.split(",");
        el("circle", {cx: x, cy: y, r: 2.2, fill: COLORS[i]});
      }
    }
  });
  const legend = h("div.legend", {}, series.map((s, i) => {
    const swatch = h("span.swatch", {});
    swatch.style.background = COLORS[i];  // CSSOM, allowed by the CSP (a style attribute is not)
    return h("span", {}, swatch, s.label);
  }));
  return h("div.card.chart", {}, h("div.label", {}, `${title} (${unit})`), svg, legend,
    points.length ? null : h("div.sub", {}, "Collecting: a point every few seconds."));
}

// ---- pages -------------------------------------------------------------------------

function card(id, label, value, sub, bad) {
  return h(`div.card#card-${id}${bad ? ".bad" : ""}`, {}, h("div.label", {}, label), h("div.value", {}, value), sub ? h("div.sub", {}, sub) : null);
}

let autoVerifyStarted = false;

async function overview(serial) {
  const [st, verify, hist] = await Promise.all([api("/ops/status"), api("/ops/verify"), api("/ops/history")]);
  if (serial !== pageSerial) return;
  const verified = Object.values(verify.tenants);
  const broken = verified.filter((t) => !t.chain_intact);
  if (!verified.length && st.tenants.length && !autoVerifyStarted) {
    autoVerifyStarted = true;  // the first visit verifies every chain once
    api("/ops/verify", {method: "POST", body: {}}).catch(() => {});
  }
  const running = verify.jobs.find((j) => j.state === "running");
  const healthy = st.healthy && broken.length === 0;
  const reasons = [];
  if (st.dead_letters > 0) reasons.push(`${st.dead_letters} dead letter(s)`);
  if (st.dlq.visible + st.dlq.in_flight > 0) reasons.push("messages in the DLQ");
  // One row per queue: the event queue, then each consumer queue (docs/ROUTING.md §6a).
  const queues = [Object.assign({}, st.queue, {dlq: st.dlq})].concat(st.consumer_queues || []);
  const depthOf = (q) => q && q.exists ? q.visible + q.in_flight : 0;
  for (const c of st.consumer_queues || []) {
    if (depthOf(c.dlq) > 0) reasons.push(`messages in ${c.dlq.name}, the DLQ of ${c.name}`);
  }
  const queueRows = queues.map((q) => h(`tr${depthOf(q.dlq) > 0 ? ".bad" : ""}`, {dataset: {queue: q.name}},
    h("td", {}, q.name), h("td.num", {}, fmtNum(q.visible)), h("td.num", {}, fmtNum(q.in_flight)),
    h("td.num", {}, fmtNum(q.delayed)), h("td.num", {}, fmtSecs(q.oldest_age_seconds)),
    h("td", {}, q.dlq && q.dlq.name ? q.dlq.name : "no DLQ"), h("td.num.dlq-depth", {}, fmtNum(depthOf(q.dlq)))));
  if (st.poison_pills > 0) reasons.push(`${st.poison_pills} poison pill(s)`);
  if (broken.length) reasons.push(`${broken.length} broken chain(s)`);
  const chainText = running ? `verifying… ${fmtNum(running.verified_events)}/${fmtNum(running.total_events)}`
    : verified.length ? `${verified.length - broken.length}/${st.tenants.length} intact` : "not verified";
  const dlqDepth = st.dlq.exists ? st.dlq.visible + st.dlq.in_flight : 0;
  show(
    h("h1", {}, "Overview"),
    h(`div#health.health.${healthy ? "good" : "bad"}`, {}, healthy ? "Healthy" : `Unhealthy: ${reasons.join(", ")}`),
    h("div.cards", {},
      card("queue-depth", "Queue depth", fmtNum(st.queue.visible), `${st.queue.name}`),
      card("in-flight", "In flight", fmtNum(st.queue.in_flight), `delayed ${fmtNum(st.queue.delayed)}`),
      card("oldest-age", "Oldest message", fmtSecs(st.queue.oldest_age_seconds), "age in the queue"),
      card("dlq-depth", "DLQ depth", fmtNum(dlqDepth), st.dlq.name || "no DLQ", dlqDepth > 0),
      card("dead-letters", "Dead letters", fmtNum(st.dead_letters), `${fmtNum(st.dead_letters_redriven)} redriven (audit)`, st.dead_letters > 0),
      card("poison", "Poison pills", fmtNum(st.poison_pills), "bodies no worker can read", st.poison_pills > 0),
      card("relay-lag", "Relay lag", `${fmtNum(st.relay.lag_events)} ev`, `${fmtSecs(st.relay.lag_seconds)} · ${st.relay.mode || "feed"} relay`),
      card("chains", "Hash chains", chainText, `${fmtNum(st.events)} events, ${st.tenants.length} tenants`, broken.length > 0),
    ),
    h("h2", {}, "Queues"),
    h("table#queues-table", {},
      h("thead", {}, h("tr", {}, ["Queue", "Visible", "In flight", "Delayed", "Oldest", "DLQ", "DLQ depth"].map((c, i) => h(i && i !== 5 ? "th.num" : "th", {}, c)))),
      h("tbody", {}, queueRows)),
    h("div.charts", {},
      chart("Throughput", hist.points, [{key: "emitted_per_second", label: "emitted"}, {key: "completed_per_second", label: "completed"}], "events/s"),
      chart("Propagation latency", hist.points, [{key: "p50_ms", label: "p50"}, {key: "p99_ms", label: "p99"}], "ms"),
      chart("Queues", hist.points, [{key: "queue_depth", label: "queue"}, {key: "in_flight", label: "in flight"}, {key: "dlq_depth", label: "DLQ"}], "messages"),
    ),
    h("p.muted", {}, `Status at ${fmtTime(st.at)}; refreshes every ${REFRESH_MS / 1000} s. Charts: this server's metrics, one point per ${hist.interval_seconds} s.`),
  );
  scheduleRefresh();
}

async function tenants(serial) {
  const [st, verify] = await Promise.all([api("/ops/status"), api("/ops/verify")]);
  if (serial !== pageSerial) return;
  const progress = h("div.progress", {}, h("div#verify-bar"));
  const progressText = h("span#verify-progress.muted", {});
  const describe = (job) => {
    const pct = job.total_events ? Math.min(100, 100 * job.verified_events / job.total_events) : 100;
    progress.firstChild.style.width = `${pct}%`;
    progressText.textContent = `${job.state}: ${fmtNum(job.verified_events)} of ${fmtNum(job.total_events)} events, ${job.tenants_done}/${job.tenants} tenants` +
      (job.current_tenant ? ` (now ${job.current_tenant})` : "") + (job.error ? ` — ${job.error}` : "") +
      (job.state === "done" ? `, ${job.broken_tenants} broken` : "");
  };
  const watch = async (job) => {
    while (serial === pageSerial) {
      describe(job);
      if (job.state !== "running") { if (serial === pageSerial) tenants(serial).catch(pageError(serial)); return; }
      await new Promise((r) => setTimeout(r, 300));
      job = await api(`/ops/verify/${job.id}`);
    }
  };
  const start = async (list) => watch(await api("/ops/verify", {method: "POST", body: list ? {tenants: list} : {}}));
  const rows = st.tenants.map((t) => {
    const v = verify.tenants[t.tenant];
    const chain = v ? (v.chain_intact ? pill("intact", "ok") : pill(`broken at seq ${v.first_broken_seq} (${v.chain_break})`, "bad")) : pill("not verified");
    return h("tr", {dataset: {tenant: t.tenant}},
      h("td", {}, link(hashFor("events", {tenant: t.tenant}), t.tenant)),
      h("td.num", {}, fmtNum(t.events)), h("td.num", {}, fmtNum(t.last_seq)),
      h("td", {}, chain, v ? h("div.sub.muted", {}, `verified ${fmtTime(v.verified_at)} · ${fmtNum(v.events)} events${v.anchor_seq ? ` from seq ${fmtNum(v.anchor_seq + 1)} (1–${fmtNum(v.anchor_seq)} removed by retention)` : ""}`) : null),
      h("td.num", {}, fmtNum(t.relay_lag_events)), h("td.num", {}, fmtSecs(t.relay_lag_seconds)),
      h("td.num", {}, t.dead_letters > 0 ? link(hashFor("dead-letters", {tenant: t.tenant}), fmtNum(t.dead_letters)) : "0"),
      h("td", {}, h("button.secondary.verify-one", {type: "button", onclick: () => start([t.tenant])}, "Verify")));
  });
  show(h("h1", {}, "Tenants"),
    h("div.toolbar", {}, h("button#verify-all", {type: "button", onclick: () => start(null)}, "Verify all chains"), progress, progressText),
    h("table#tenants-table", {},
      h("thead", {}, h("tr", {}, ["Tenant", "Events", "Last seq", "Chain", "Relay lag (events)", "Relay lag (age)", "Dead letters", ""].map((c, i) => h(i && i !== 3 && i !== 7 ? "th.num" : "th", {}, c)))),
      h("tbody", {}, rows.length ? rows : h("tr", {}, h("td", {colspan: 8}, "No tenant has emitted yet.")))));
  const running = verify.jobs.find((j) => j.state === "running");
  if (running) watch(running);
  else if (verify.jobs.length) describe(verify.jobs[0]);
}

async function events(serial, params) {
  const st = await api("/ops/status");
  if (serial !== pageSerial) return;
  const tenant = params.get("tenant") || (st.tenants[0] && st.tenants[0].tenant) || "";
  const order = params.get("order") || "desc";
  const from = params.get("from") || "";
  const searchKind = params.get("by") || "event_id";
  const q = params.get("q") || "";
  const go = (extra) => { location.hash = hashFor("events", Object.assign({tenant, order, by: searchKind, q}, extra)); };
  const tenantSel = h("select#events-tenant", {onchange: (e) => { location.hash = hashFor("events", {tenant: e.target.value, order}); }},
    st.tenants.map((t) => h("option", {value: t.tenant, selected: t.tenant === tenant}, t.tenant)));
  const orderSel = h("select#events-order", {onchange: (e) => { location.hash = hashFor("events", {tenant, order: e.target.value}); }},
    h("option", {value: "desc", selected: order === "desc"}, "newest first"), h("option", {value: "asc", selected: order === "asc"}, "oldest first"));
  const byInput = h("select#events-search-by", {}, h("option", {value: "event_id", selected: searchKind === "event_id"}, "event id"),
    h("option", {value: "correlation_id", selected: searchKind === "correlation_id"}, "correlation id"));
  const qInput = h("input#events-search", {type: "search", value: q, placeholder: "01J…", size: 30});
  const toolbar = h("form.toolbar", {onsubmit: (e) => { e.preventDefault(); location.hash = hashFor("events", {tenant, order, by: byInput.value, q: qInput.value.trim()}); }},
    h("label", {}, "Tenant", tenantSel), h("label", {}, "Order", orderSel), h("label", {}, "Search by", byInput), h("label", {}, "Value", qInput),
    h("button#events-search-go", {type: "submit"}, "Search"), q ? h("button.secondary", {type: "button", onclick: () => go({q: "", from: ""})}, "Clear") : null);
  if (!tenant) { show(h("h1", {}, "Events"), h("p.muted", {}, "No tenant has emitted yet.")); return; }
  const query = new URLSearchParams({order, limit: "25"});
  if (from) query.set("from", from);
  if (q) query.set(searchKind, q);
  const page = await api(`/ops/tenants/${encodeURIComponent(tenant)}/events?${query}`);
  if (serial !== pageSerial) return;
  const selected = params.get("id");
  const rows = page.events.map((e) => h(`tr.clickable${e.id === selected ? ".selected" : ""}`, {dataset: {id: e.id}, onclick: () => go({from, id: e.id})},
    h("td.num", {}, e.seq), h("td.mono", {}, e.id), h("td", {}, e.type), h("td", {}, fmtTime(new Date(e.occurred_at).toISOString())), h("td.mono", {}, e.correlation_id)));
  const pager = h("div.pager", {},
    from ? h("button.secondary#events-first", {type: "button", onclick: () => go({from: ""})}, order === "desc" ? "Newest" : "Oldest") : null,
    page.next_from ? h("button.secondary#events-next", {type: "button", onclick: () => go({from: page.next_from})}, order === "desc" ? "Older →" : "Newer →") : null,
    h("span.muted", {}, q ? `${page.count} match(es) in ${fmtNum(page.scanned)} events read${page.scan_truncated ? " (search stopped; continue with the next page)" : ""}` : `${page.count} events`));
  const detail = h("div#event-detail", {});
  show(h("h1", {}, `Events of ${tenant}`), toolbar,
    h("table#events-table", {}, h("thead", {}, h("tr", {}, h("th.num", {}, "Seq"), h("th", {}, "Event id"), h("th", {}, "Type"), h("th", {}, "Occurred"), h("th", {}, "Correlation id"))),
      h("tbody", {}, rows.length ? rows : h("tr", {}, h("td", {colspan: 5}, q ? "No event matches." : "No events.")))),
    pager, detail);
  const id = selected || (q && searchKind === "event_id" && page.events[0] ? page.events[0].id : "");
  if (id) await eventDetail(serial, tenant, id, detail);
}

async function eventDetail(serial, tenant, id, into) {
  const d = await api(`/ops/tenants/${encodeURIComponent(tenant)}/events/${encodeURIComponent(id)}`);
  if (serial !== pageSerial) return;
  const e = d.event;
  const subs = d.subscriptions.map((s) => {
    const i = s.inbox;
    return h("tr", {dataset: {subscription: s.subscription}},
      h("td", {}, s.subscription), h("td", {}, s.lane),
      h("td", {}, i ? (i.found ? statusPill(i.status) : pill("not run yet")) : h("span.muted", {}, "no inbox (not durable)")),
      h("td.num", {}, i && i.found ? i.attempts : ""), h("td.mono", {}, i && i.found ? i.owner : ""),
      h("td.mono", {}, i && i.found ? fmtTime(i.lease_expires_at) : ""),
      h("td.error", {}, i && i.found ? i.last_error : ""),
      h("td", {}, i && i.dead_letter ? link(hashFor("dead-letters", {tenant, state: "any", event_id: e.id}), `dead letter: ${i.dead_letter_state}`) : ""));
  });
  into.replaceChildren(
    h("h2", {}, `Event ${e.seq}: ${e.type}`),
    h("div.grid2", {},
      h("div", {}, h("dl.kv", {},
        ["id", "tenant", "seq", "type", "correlation_id", "actor", "hash", "prev_hash"].map((k) => [h("dt", {}, k), h("dd.mono", {}, e[k] === undefined ? "" : String(e[k]))]),
        h("dt", {}, "occurred_at"), h("dd", {}, new Date(e.occurred_at).toISOString()))),
      h("div", {}, h("div.label.muted", {}, "Payload"), h("pre#event-payload", {}, JSON.stringify(e.payload, null, 2)))),
    h("h2", {}, "Subscriptions"),
    h("table#event-subscriptions", {}, h("thead", {}, h("tr", {}, ["Subscription", "Lane", "Inbox", "Attempts", "Lease owner", "Lease expires", "Last error", ""].map((c) => h("th", {}, c)))),
      h("tbody", {}, subs.length ? subs : h("tr", {}, h("td", {colspan: 8}, "No subscription matches this event (delivered to nobody).")))),
    h("h2", {}, "Envelope"), h("pre#event-envelope", {}, JSON.stringify(e, null, 2)));
}

function confirmDialog(title, text, okLabel) {
  return new Promise((resolve) => {
    const done = (v) => { back.remove(); resolve(v); };
    const back = h("div.modal-back", {}, h("div.modal#confirm", {role: "dialog", "aria-modal": "true"},
      h("h2", {}, title), h("p#confirm-text", {}, text),
      h("div.actions", {}, h("button.secondary#confirm-cancel", {type: "button", onclick: () => done(false)}, "Cancel"),
        h("button.danger#confirm-ok", {type: "button", onclick: () => done(true)}, okLabel))));
    document.body.appendChild(back);
  });
}

async function deadLetters(serial, params) {
  const [st, subsResp] = await Promise.all([api("/ops/status"), api("/ops/subscriptions")]);
  if (serial !== pageSerial) return;
  const tenant = params.get("tenant") || "", sub = params.get("subscription") || "", state = params.get("state") || "dead";
  const eventId = params.get("event_id") || "";
  const query = new URLSearchParams({state, limit: "500"});
  if (tenant) query.set("tenant", tenant);
  if (sub) query.set("subscription", sub);
  if (eventId) query.set("event_id", eventId);
  const [list, poison] = await Promise.all([api(`/ops/dead-letters?${query}`), api("/ops/poison?limit=100")]);
  if (serial !== pageSerial) return;
  const nav = (p) => { location.hash = hashFor("dead-letters", Object.assign({tenant, subscription: sub, state}, p)); };
  const filters = h("div.toolbar", {},
    h("label", {}, "Subscription", h("select#dl-subscription", {onchange: (e) => nav({subscription: e.target.value})},
      h("option", {value: ""}, "any"), subsResp.subscriptions.filter((s) => s.lane === "DURABLE").map((s) => h("option", {value: s.name, selected: s.name === sub}, s.name)))),
    h("label", {}, "Tenant", h("select#dl-tenant", {onchange: (e) => nav({tenant: e.target.value})},
      h("option", {value: ""}, "any"), st.tenants.map((t) => h("option", {value: t.tenant, selected: t.tenant === tenant}, t.tenant)))),
    h("label", {}, "State", h("select#dl-state", {onchange: (e) => nav({state: e.target.value})},
      ["dead", "redriven", "any"].map((s) => h("option", {value: s, selected: s === state}, s)))),
    eventId ? h("span.muted", {}, `event ${eventId} `, h("button.link", {type: "button", onclick: () => nav({event_id: ""})}, "(all events)")) : null);
  const result = h("div#redrive-result", {});
  const checks = [];
  const selectedIds = () => checks.filter((c) => c.checked).map((c) => c.value);
  const redriveSelected = h("button#redrive-selected", {type: "button", disabled: true}, "Redrive selected");
  const refreshSelected = () => {
    const n = selectedIds().length;
    redriveSelected.disabled = n === 0;
    redriveSelected.textContent = n ? `Redrive selected (${n})` : "Redrive selected";
  };
  const redrive = async (selection, what) => {
    result.replaceChildren();
    try {
      const dry = await api("/ops/redrive", {method: "POST", body: Object.assign({dry_run: true}, selection)});
      if (dry.selected === 0) { result.replaceChildren(h("div.banner.ok", {}, "Nothing to redrive: no dead letter matches.")); return; }
      if (!(await confirmDialog("Redrive dead letters", `Redrive ${dry.selected} dead letter(s) ${what}? Each runs its subscription once more; completed subscriptions of the same events are skipped.`, `Redrive ${dry.selected}`))) return;
      const r = await api("/ops/redrive", {method: "POST", body: selection});
      await deadLetters(serial, params);
      document.getElementById("redrive-result").replaceChildren(h(`div.banner.${r.failed ? "bad" : "ok"}#redrive-done`, {role: "status"},
        `Redriven ${r.reset + r.resumed} of ${r.selected} dead letter(s): ${r.events} event(s) re-enqueued (${r.from_dlq} from the DLQ, ${r.from_log} from the log)` +
        (r.skipped ? `, ${r.skipped} skipped` : "") + (r.failed ? `, ${r.failed} failed` : "") + "."));
    } catch (err) {
      if (err.status !== 401) result.replaceChildren(errorBanner(err));
    }
  };
  redriveSelected.addEventListener("click", () => redrive({ids: selectedIds()}, "selected"));
  const redriveSub = sub ? h("button.danger#redrive-subscription", {type: "button", onclick: () => redrive(Object.assign({subscriptions: [sub]}, tenant ? {tenants: [tenant]} : {}), `of subscription ${sub}${tenant ? " for tenant " + tenant : ""}`)}, `Redrive all of ${sub}`) : null;
  const rows = list.dead_letters.map((d) => {
    const cb = d.state === "DEAD" ? h("input.dl-select", {type: "checkbox", value: d.id, "aria-label": `select ${d.id}`, onchange: refreshSelected}) : null;
    if (cb) checks.push(cb);
    return h("tr", {dataset: {id: d.id, state: d.state}},
      h("td", {}, cb), h("td", {}, link(hashFor("events", {tenant: d.tenant, id: d.event_id, by: "event_id", q: d.event_id}), d.tenant + " #" + d.seq)),
      h("td", {}, d.event_type), h("td", {}, d.subscription), h("td.error", {}, d.error),
      h("td.num", {}, d.attempts), h("td", {}, fmtTime(d.dead_at)),
      h("td", {}, statusPill(d.state), d.redrives ? h("div.sub.muted", {}, `redriven ${d.redrives}× ${d.redriven_at ? fmtTime(d.redriven_at) : ""}`) : null),
      h("td", {}, d.state === "DEAD" ? h("button.secondary.redrive-one", {type: "button", onclick: () => redrive({ids: [d.id]}, `(${d.id})`)}, "Redrive") : null));
  });
  const allBox = h("input#dl-select-all", {type: "checkbox", "aria-label": "select all", onchange: (e) => { checks.forEach((c) => { c.checked = e.target.checked; }); refreshSelected(); }});
  const poisonRows = poison.poison_pills.map((p) => h("tr", {},
    h("td", {}, p.source), h("td.mono", {}, p.id), h("td.error", {}, p.error), h("td", {}, p.queue), h("td", {}, p.group_id),
    h("td.num", {}, p.receive_count), h("td", {}, fmtTime(p.recorded_at)),
    h("td", {}, h("pre.poison-body", {}, p.body), p.body_bytes > p.body.length ? h("div.muted", {}, `${fmtNum(p.body_bytes)} bytes (truncated)`) : null)));
  show(h("h1", {}, "Dead letters"), filters,
    h("div.toolbar", {}, redriveSelected, redriveSub, h("span.muted#dl-count", {}, `${list.count} ${state === "dead" ? "dead" : state} letter(s)`)),
    result,
    h("table#dl-table", {}, h("thead", {}, h("tr", {}, h("th", {}, allBox), ["Event", "Type", "Subscription", "Error", "Attempts", "Dead at", "State", ""].map((c) => h(c === "Attempts" ? "th.num" : "th", {}, c)))),
      h("tbody", {}, rows.length ? rows : h("tr", {}, h("td", {colspan: 9}, state === "dead" ? "No dead letters." : "None.")))),
    h("h2", {}, `Poison pills (${poison.count})`),
    h("p.muted", {}, "Messages no worker could read as an event, and change records the relay could not forward, with their raw body."),
    h("table#poison-table", {}, h("thead", {}, h("tr", {}, ["Source", "Id", "Error", "Queue", "Group", "Receives", "Recorded", "Body"].map((c) => h("th", {}, c)))),
      h("tbody", {}, poisonRows.length ? poisonRows : h("tr", {}, h("td", {colspan: 8}, "No poison pills.")))));
}

async function subscriptions(serial) {
  const [subs, st] = await Promise.all([api("/ops/subscriptions"), api("/ops/status?inbox=true")]);
  if (serial !== pageSerial) return;
  const inbox = Object.fromEntries(st.inbox.map((c) => [c.subscription, c]));
  const rows = subs.subscriptions.map((s) => {
    const c = inbox[s.name];
    const b = s.circuit_breaker;
    return h("tr", {dataset: {subscription: s.name}},
      h("td", {}, s.name), h("td", {}, s.lane), h("td.mono", {}, s.glob, s.pattern ? h("div.muted", {}, s.pattern) : null),
      h("td", {}, s.handler, s.webhook_url ? h("div.mono.muted", {}, s.webhook_url) : null),
      h("td.num", {}, fmtNum(s.outcomes.completed)), h("td.num", {}, fmtNum(s.outcomes.retry)),
      h("td.num", {}, s.outcomes.dead > 0 ? h("span.pill.bad", {}, fmtNum(s.outcomes.dead)) : "0"),
      h("td.num", {}, `${fmtMs(s.handler_duration.p50_ms)} / ${fmtMs(s.handler_duration.p99_ms)}`),
      h("td.num", {}, `${fmtMs(s.propagation_latency.p50_ms)} / ${fmtMs(s.propagation_latency.p99_ms)}`),
      h("td", {}, c ? `${fmtNum(c.completed)} completed · ${fmtNum(c.retry)} retry · ${fmtNum(c.pending)} pending · ${fmtNum(c.dead)} dead · ${fmtNum(c.absent)} not delivered` : h("span.muted", {}, "–")),
      h("td", {}, b ? pill(b.state.replace("_", "-"), b.state === "closed" ? "ok" : "bad") : h("span.muted", {}, "–"), b && b.opens ? h("div.sub.muted", {}, `opened ${b.opens}×`) : null));
  });
  show(h("h1", {}, "Subscriptions"),
    h("div.cards", {}, card("unmatched", "Matched no subscriber", fmtNum(subs.unmatched_events), "events since this server started")),
    h("h2", {}, "Subscriptions"),
    h("table#subs-table", {}, h("thead", {}, h("tr", {}, ["Name", "Lane", "Glob / pattern", "Handler", "Completed", "Retry", "Dead", "Handler p50 / p99", "Propagation p50 / p99", "Inbox rows (store)", "Circuit"].map((c) => h("th", {}, c)))),
      h("tbody", {}, rows.length ? rows : h("tr", {}, h("td", {colspan: 11}, "No subscriptions in the configuration.")))),
    h("p.muted", {}, "Outcomes and durations: this server's deliveries since it started (the /metrics counters). Inbox rows: the store's durable record (newest events first, bounded by the scan limit)."));
}

// ---- router ------------------------------------------------------------------------

const PAGES = {"overview": overview, "tenants": tenants, "events": events, "dead-letters": deadLetters, "subscriptions": subscriptions};

function parseHash() {
  const raw = location.hash.replace(/^#\/?/, "");
  const [page, query] = raw.split("?");
  return {page: PAGES[page] ? page : "overview", params: new URLSearchParams(query || "")};
}

function stopRefresh() { if (refreshTimer) { clearTimeout(refreshTimer); refreshTimer = null; } }
function scheduleRefresh() {
  stopRefresh();
  const serial = pageSerial;
  refreshTimer = setTimeout(() => { if (serial === pageSerial) overview(serial).catch(pageError(serial)); }, REFRESH_MS);
}
function pageError(serial) {
  return (err) => { if (serial === pageSerial && !(err instanceof HttpError && err.status === 401)) show(errorBanner(err)); };
}

function route() {
  stopRefresh();
  const serial = ++pageSerial;
  const {page, params} = parseHash();
  for (const a of document.querySelectorAll("#nav a")) a.classList.toggle("active", a.dataset.page === page);
  document.getElementById("sign-out").hidden = !sessionStorage.getItem(TOKEN_KEY);
  document.title = `outbox · ${page}`;
  PAGES[page](serial, params).catch(pageError(serial));
}

window.addEventListener("hashchange", route);
window.addEventListener("DOMContentLoaded", () => {
  document.getElementById("sign-out").addEventListener("click", () => { sessionStorage.removeItem(TOKEN_KEY); signIn(""); });
  fetch("/healthz", {cache: "no-store"}).then((r) => r.json()).then((j) => {
    document.getElementById("server-state").textContent = `server ${j.status}`;
  }).catch(() => { document.getElementById("server-state").textContent = "server unreachable"; });
  route();
});
