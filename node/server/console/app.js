// Strand console: draws /api/cluster, /api/topics, /api/groups and
// /api/transactions every few seconds. Plain DOM building (textContent only: names come from users).
"use strict";

const REFRESH_MS = 5000;

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else e.setAttribute(k, v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function fmtBytes(n) {
  if (n < 0) return "?";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? n : n.toFixed(1)) + " " + units[i];
}

function fmtSeconds(s) {
  if (s < 0) return "?";
  if (s === 0) return "0 s";
  if (s < 1) return s.toFixed(2) + " s";
  if (s < 120) return s.toFixed(0) + " s";
  if (s < 7200) return (s / 60).toFixed(0) + " min";
  if (s < 172800) return (s / 3600).toFixed(1) + " h";
  return (s / 86400).toFixed(1) + " d";
}

function num(n) { return n < 0 ? "?" : n.toLocaleString("en-US"); }

async function getJSON(path) {
  const r = await fetch(path, { cache: "no-store" });
  if (!r.ok) throw new Error(path + ": " + r.status + " " + (await r.text()));
  return r.json();
}

function renderNodes(cluster) {
  const body = document.querySelector("#nodes tbody");
  body.replaceChildren();
  for (const n of cluster.nodes) {
    const health = n.health === "ready" ? el("span", { class: "ok" }, "ready")
      : n.health === "unknown" ? el("span", { class: "muted", title: "not served by this admin listener" }, "unknown")
      : el("span", { class: "bad", title: n.reason || "" }, "not ready: " + (n.reason || ""));
    const lead = n.id === cluster.metadata_leader ? el("span", { class: "chip leader" }, "metadata leader") : null;
    body.append(el("tr", { "data-node": n.id },
      el("td", {}, n.id, " ", lead),
      el("td", {}, n.address),
      el("td", {}, n.kafka_address || "–"),
      el("td", {}, n.rack || "–"),
      el("td", {}, health, n.registered ? null : el("span", { class: "warn" }, " (not registered)")),
      el("td", {}, n.replicas < 0 ? "?" : n.replicas),
      el("td", {}, n.leading < 0 ? "?" : n.leading),
      el("td", {}, n.disk_stalled ? el("span", { class: "bad" }, "STALLED")
        : n.disk_full ? el("span", { class: "bad" }, "FULL") : "ok")));
  }
  const ready = cluster.nodes.filter(n => n.health === "ready").length;
  document.getElementById("summary").textContent =
    cluster.nodes.length + " nodes (" + ready + " ready) · metadata leader " +
    (cluster.metadata_leader || "none") + " · version " + cluster.metadata_version;
  const moves = document.getElementById("moves");
  moves.replaceChildren();
  if (!cluster.moves || cluster.moves.length === 0) {
    moves.append(el("p", { class: "muted" }, "No moves in progress."));
  } else {
    const t = el("table", {}, el("tr", {}, el("th", {}, "partition"), el("th", {}, "from"), el("th", {}, "to"),
      el("th", {}, "leader"), el("th", {}, "done"), el("th", {}, "adding")));
    for (const m of cluster.moves) {
      const known = m.percent >= 0;
      const adding = (m.adding || []).map(a => "node " + a.node + " " + a.percent.toFixed(0) + "% (" +
        (a.voter ? "voter" : "learner") + ")").join(", ");
      t.append(el("tr", { class: "move" }, el("td", {}, m.topic + "/" + m.partition), el("td", {}, m.from.join(",")),
        el("td", {}, m.to.join(",")), el("td", {}, m.leader ? "node " + m.leader : "?"),
        el("td", { class: "move-percent" }, known ? m.percent.toFixed(0) + "%" : "?"),
        el("td", {}, known ? adding : "leader not served by this listener")));
    }
    moves.append(t);
  }
}

function replicaChip(r) {
  const cls = r.state === "leader" ? "chip leader"
    : r.state === "catching up" ? "chip lagging"
    : (r.state === "no leader" || r.state === "rebuilding") ? "chip down" : "chip";
  const lag = r.lag_entries ? " −" + r.lag_entries : "";
  return el("span", { class: cls, title: r.state }, r.node + " " + r.state + lag);
}

// compactionLine is one compacted partition's state: its dirty ratio and
// the bytes on either side, then the last compaction done and the
// replica's last pass (bytes read and written, time), as describe prints.
function compactionLine(p) {
  const c = p.compaction;
  let line = "partition " + p.partition + " compaction: dirty ratio " + c.dirty_ratio.toFixed(2) +
    " (dirty " + fmtBytes(c.dirty_bytes) + ", clean " + fmtBytes(c.clean_bytes) + "); ";
  line += c.generation === 0 ? "no compaction yet"
    : "generation " + c.generation + (c.last_time_ms ? " at " + new Date(c.last_time_ms).toISOString() : "") +
      ", cleaned to offset " + num(c.cleaned_to);
  if (c.last_pass_bytes_in > 0 || c.last_pass_bytes_out > 0 || c.last_pass_ms > 0) {
    line += "; last pass read " + fmtBytes(c.last_pass_bytes_in) + ", wrote " + fmtBytes(c.last_pass_bytes_out) +
      " in " + (c.last_pass_ms < 1000 ? c.last_pass_ms.toFixed(0) + " ms" : fmtSeconds(c.last_pass_ms / 1000));
  }
  if (c.in_progress) line += "; next generation under way";
  if (c.no_longer_compacts) line += "; the topic no longer compacts";
  return [line, c.stuck ? el("span", { class: "bad" }, " stuck: " + c.stuck) : null];
}

function renderTopics(data) {
  const root = document.getElementById("topics");
  root.replaceChildren();
  if (data.topics.length === 0) { root.append(el("p", { class: "muted" }, "No topics.")); return; }
  for (const t of data.topics) {
    const table = el("table", { class: "partitions" }, el("tr", {},
      el("th", {}, "partition"), el("th", {}, "leader"), el("th", {}, "term"), el("th", {}, "replicas"),
      el("th", {}, "log start"), el("th", {}, "high watermark"), el("th", {}, "size")));
    for (const p of t.partitions) {
      table.append(el("tr", { "data-partition": t.name + "/" + p.partition },
        el("td", {}, p.partition, p.under_replicated ? el("span", { class: "warn" }, " under-replicated") : null),
        el("td", { class: "leader" }, p.leader ? "node " + p.leader : el("span", { class: "bad" }, "none")),
        el("td", {}, p.leader_term),
        el("td", {}, ...p.replicas.map(replicaChip)),
        el("td", {}, num(p.log_start_offset)),
        el("td", {}, num(p.high_watermark)),
        el("td", {}, fmtBytes(p.size_bytes))));
    }
    const compacted = t.partitions.filter(p => p.compaction);
    const compaction = compacted.length === 0 ? null : el("ul", { class: "compaction" },
      ...compacted.map(p => el("li", { "data-compaction": t.name + "/" + p.partition }, ...compactionLine(p))));
    const retention = t.retention_ms > 0 ? "retention " + fmtSeconds(t.retention_ms / 1000) : "no time retention";
    root.append(el("div", { class: "topic", "data-topic": t.name },
      el("h3", {}, t.name, " ", el("span", { class: "muted" }, t.partitions.length + " partitions · " + retention)), table,
      compaction));
  }
}

// chart draws a group's lag history: records (solid, left scale) and
// seconds (dashed, right scale), with the retention line when it is in
// view of the seconds scale.
function chart(history, retentionMs) {
  const W = 600, H = 140, L = 50, R = 50, T = 10, B = 20;
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("class", "chart");
  svg.setAttribute("viewBox", "0 0 " + W + " " + H);
  svg.setAttribute("preserveAspectRatio", "none");
  const add = (tag, attrs, text) => {
    const e = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    svg.append(e);
    return e;
  };
  const now = history.length ? history[history.length - 1].t : Date.now();
  const t0 = now - 3600 * 1000;
  const maxRec = Math.max(1, ...history.map(s => s.records));
  let maxSec = Math.max(1, ...history.map(s => s.seconds));
  const retSec = retentionMs / 1000;
  const showRetention = retSec > 0 && retSec < maxSec * 4;
  if (showRetention) maxSec = Math.max(maxSec, retSec * 1.05);
  const x = t => L + (W - L - R) * Math.max(0, (t - t0)) / (now - t0);
  const yRec = v => H - B - (H - T - B) * v / maxRec;
  const ySec = v => H - B - (H - T - B) * v / maxSec;
  add("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: "#ccd" });
  add("text", { x: 2, y: T + 8 }, maxRec.toLocaleString("en-US"));
  add("text", { x: 2, y: H - B }, "0");
  add("text", { x: W - R + 4, y: T + 8 }, fmtSeconds(maxSec));
  add("text", { x: L, y: H - 4 }, "−60 min");
  add("text", { x: W - R - 20, y: H - 4 }, "now");
  if (showRetention) {
    add("line", { class: "retention", x1: L, x2: W - R, y1: ySec(retSec), y2: ySec(retSec) });
    add("text", { x: L + 4, y: ySec(retSec) - 3 }, "retention");
  }
  const pts = f => history.filter(s => s.t >= t0).map(s => x(s.t).toFixed(1) + "," + f(s).toFixed(1)).join(" ");
  if (history.length > 0) {
    add("polyline", { class: "records", points: pts(s => yRec(s.records)) });
    add("polyline", { class: "seconds", points: pts(s => ySec(s.seconds)) });
    for (const s of history.slice(-1)) add("circle", { cx: x(s.t), cy: yRec(s.records), r: 3, fill: "#2f6fde" });
  }
  return svg;
}

function renderGroups(data) {
  const root = document.getElementById("groups");
  root.replaceChildren();
  if (data.groups.length === 0) { root.append(el("p", { class: "muted" }, "No consumer groups.")); return; }
  for (const g of data.groups) {
    const table = el("table", {}, el("tr", {}, el("th", {}, "partition"), el("th", {}, "committed"),
      el("th", {}, "high watermark"), el("th", {}, "lag"), el("th", { title: "lag to the last stable offset: what a read_committed consumer has left" }, "lag (read_committed)"),
      el("th", {}, "lag time"), el("th", {}, "headroom")));
    for (const p of g.partitions) {
      table.append(el("tr", {},
        el("td", {}, p.topic + "/" + p.partition),
        el("td", {}, num(p.committed)),
        el("td", {}, p.known ? num(p.high_watermark) : "?"),
        el("td", {}, p.known ? num(p.lag) : "?"),
        el("td", { class: "lag-stable" }, p.known ? num(p.lag_stable) : "?"),
        el("td", {}, p.known ? fmtSeconds(p.lag_seconds) : "?"),
        el("td", {}, p.at_risk ? el("span", { class: "bad" }, "DATA LOST") : p.known ? num(p.headroom_records) + " rec" : "?")));
    }
    const retention = g.retention_ms > 0 ? " · retention " + fmtSeconds(g.retention_ms / 1000) : "";
    const head = el("div", {},
      el("h3", {}, g.id, " ", el("span", { class: "muted" }, g.state + " · " + g.members + " members · coordinator node " + g.coordinator)),
      el("p", {}, "lag ", el("b", { class: "lag-records" }, num(g.lag_records)), " records · ",
        el("b", { class: "lag-seconds" }, fmtSeconds(g.lag_seconds)), retention,
        g.lag_stable_records !== g.lag_records ? el("span", { title: "open transactions hold read_committed consumers back" },
          " · read_committed ", el("b", { class: "lag-stable-records" }, num(g.lag_stable_records)), " records") : null,
        g.at_risk ? el("span", { class: "bad" }, " · below the log start: records lost") : null,
        g.dead_letters > 0 ? el("span", { class: "dead-letters" }, " · " + num(g.dead_letters) + " dead-lettered") : null),
      table);
    const legend = el("p", { class: "muted" }, "last hour, sampled every " + data.sample_interval_seconds +
      " s: records (solid, left), seconds (dashed, right)");
    root.append(el("div", { class: "group", "data-group": g.id }, head, el("div", {}, chart(g.history, g.retention_ms), legend)));
  }
}

// OLD_OPEN_SECONDS is the age past which an open transaction is flagged:
// Kafka's default transaction.timeout.ms.
const OLD_OPEN_SECONDS = 60;

// txnCounts is the "N committed · N aborted (N timed out) · N begun" text.
function txnCounts(c) {
  return [el("b", { class: "txn-committed" }, num(c.committed)), " committed · ",
    el("b", { class: "txn-aborted" }, num(c.aborted)), " aborted (", el("b", { class: "txn-timed-out" }, num(c.timed_out)),
    " timed out) · ", num(c.begun), " begun", c.marker_retries > 0 ? " · " + num(c.marker_retries) + " marker retries" : null];
}

function renderTransactions(data) {
  const root = document.getElementById("transactions");
  root.replaceChildren();
  const old = data.open > 0 && data.oldest_open_seconds >= OLD_OPEN_SECONDS;
  root.append(el("p", { "data-txn": "summary" }, el("b", { class: "txn-open" }, num(data.open)), " open",
    data.open > 0 ? el("span", old ? { class: "warn", title: "open longer than Kafka's default transaction.timeout.ms" } : {}, " · oldest ",
      el("b", { class: "txn-oldest" }, fmtSeconds(data.oldest_open_seconds))) : null,
    " · ", ...txnCounts(data)));
  if (data.nodes.length > 1) {
    const t = el("table", {}, el("tr", {}, el("th", {}, "node"), el("th", {}, "open"), el("th", {}, "oldest"),
      el("th", {}, "decided")));
    for (const n of data.nodes) {
      t.append(el("tr", { "data-txn-node": n.node }, el("td", {}, "node " + n.node), el("td", {}, num(n.open)),
        el("td", {}, n.open > 0 ? fmtSeconds(n.oldest_open_seconds) : "–"), el("td", {}, ...txnCounts(n))));
    }
    root.append(t);
  }
  if (data.held_back.length === 0) {
    root.append(el("p", { class: "muted" }, "No partition held back: read_committed readers reach the high-water mark."));
    return;
  }
  const t = el("table", {}, el("tr", {}, el("th", {}, "held back partition"), el("th", {}, "high watermark"),
    el("th", {}, "last stable offset"), el("th", {}, "records held back")));
  for (const h of data.held_back) {
    t.append(el("tr", { "data-held-back": h.topic + "/" + h.partition }, el("td", {}, h.topic + "/" + h.partition),
      el("td", {}, num(h.high_watermark)), el("td", {}, num(h.last_stable_offset)),
      el("td", { class: "lso-lag" }, num(h.lso_lag_records))));
  }
  root.append(t, el("p", { class: "muted" }, "read_committed readers wait at the last stable offset until the open transaction ends" +
    (data.held_back_truncated ? " (the most held back shown)" : "") + "; strand txn list --state Ongoing names it."));
}

async function refresh() {
  try {
    const [cluster, topics, groups, txns] = await Promise.all([getJSON("api/cluster"), getJSON("api/topics"),
      getJSON("api/groups"), getJSON("api/transactions")]);
    renderNodes(cluster);
    renderTopics(topics);
    renderGroups(groups);
    renderTransactions(txns);
    document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString();
    document.body.setAttribute("data-rendered", "true");
  } catch (e) {
    document.getElementById("updated").textContent = "error: " + e.message;
  }
}

refresh();
setInterval(refresh, REFRESH_MS);
