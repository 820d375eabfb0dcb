// weir web UI: renders the REST API of the job next to it. Routes live in
// the URL's fragment (#/jobs/<jid>, #/jobs/<jid>/checkpoints/<cid>,
// #/jobs/<jid>/checkpoints/<cid>/cut); the current view is fetched and
// rendered again every REFRESH_MS. When a view has rendered, <body> gets
// data-ready set to the route, which tests wait for.
"use strict";
(function () {
  const REFRESH_MS = 2000;
  const main = document.getElementById("main");
  const crumbs = document.getElementById("crumbs");
  const live = document.getElementById("live");
  let timer = null;
  let generation = 0;
  // Counter samples per vertex, for throughput between two refreshes.
  const samples = new Map();
  // Cuts of checkpoints, by "jid/cid": their recorded positions never change.
  const cuts = new Map();

  // ---------------------------------------------------------------- helpers

  async function api(path) {
    const r = await fetch(path, { cache: "no-store", headers: { Accept: "application/json" } });
    // The session ended (it expires, and with the server): log in again,
    // back to this route.
    if (r.status === 401) location.replace("/login" + (location.hash.startsWith("#/") ? location.hash : ""));
    let body = null;
    try { body = await r.json(); } catch (e) { body = null; }
    if (!r.ok) {
      const msg = body && body.errors ? body.errors.join("; ") : r.status + " " + r.statusText;
      const err = new Error(msg);
      err.status = r.status;
      throw err;
    }
    return body;
  }

  function esc(s) {
    return String(s == null ? "" : s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
  }
  function num(n) { return n == null || n < 0 ? "–" : Math.round(n).toLocaleString("en-US"); }
  function bytes(n) {
    if (n == null || n < 0) return "–";
    if (n < 1024) return n + " B";
    const u = ["KB", "MB", "GB", "TB"];
    let v = n / 1024, i = 0;
    while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
    return (v < 10 ? v.toFixed(1) : Math.round(v)) + " " + u[i];
  }
  function ms(n) {
    if (n == null || n < 0) return "–";
    if (n < 1000) return Math.round(n) + " ms";
    if (n < 60000) return (n / 1000).toFixed(n < 10000 ? 2 : 1) + " s";
    return span(n);
  }
  function span(n) {
    if (n == null || n < 0) return "–";
    const s = Math.floor(n / 1000), h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
    if (h > 0) return h + "h " + String(m).padStart(2, "0") + "m";
    if (m > 0) return m + "m " + String(sec).padStart(2, "0") + "s";
    return sec + "s";
  }
  function time(ts, withMs) {
    if (!ts || ts < 0) return "–";
    const d = new Date(ts);
    const p = (x, n) => String(x).padStart(n || 2, "0");
    let t = p(d.getHours()) + ":" + p(d.getMinutes()) + ":" + p(d.getSeconds());
    if (withMs) t += "." + p(d.getMilliseconds(), 3);
    return t;
  }
  function rate(r) {
    if (r == null || !isFinite(r)) return "–";
    return (r < 10 ? r.toFixed(1) : Math.round(r).toLocaleString("en-US")) + "/s";
  }
  function trunc(s, n) { s = String(s); return s.length > n ? s.slice(0, n - 1) + "…" : s; }
  function pillClass(status) {
    switch (String(status).toUpperCase()) {
      case "COMPLETED": case "RUNNING": case "FINISHED": case "OK": return "ok";
      case "FAILED": case "CANCELED": case "HIGH": return "bad";
      case "IN_PROGRESS": case "LOW": case "CANCELLING": case "RESTARTING": case "FAILING": return "warn";
      default: return "";
    }
  }
  function pill(status) { return `<span class="pill ${pillClass(status)}">${esc(String(status).replace(/_/g, " "))}</span>`; }
  // scale returns an axis for values up to v: a step of 1, 2 or 5 times
  // a power of ten (at least min), and the multiple of it just above v.
  function scale(v, min) {
    const raw = Math.max(min || 0, (v > 0 ? v : 1) / 4);
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    let step = 10 * p;
    for (const m of [1, 2, 5]) if (m * p >= raw) { step = m * p; break; }
    const ticks = Math.max(1, Math.ceil(v / step));
    return { max: step * ticks, step, ticks };
  }
  function card(span, title, body, aside) {
    return `<section class="card span-${span}"><h2>${title}${aside ? `<span class="aside">${aside}</span>` : ""}</h2>${body}</section>`;
  }
  function stat(k, v, small) {
    return `<div class="stat"><div class="k">${k}</div><div class="v">${v}${small ? ` <small>${small}</small>` : ""}</div></div>`;
  }
  function vertexName(job, id) {
    const v = job.vertices.find((x) => x.id === id);
    return v ? v.name : id.slice(0, 8);
  }

  // Topological levels of the plan: a source is level 0, any other vertex
  // one more than its deepest input. Within a level, vertices are ordered
  // by the mean row of their inputs to keep edges from crossing.
  function layout(plan) {
    const byId = new Map(plan.nodes.map((n) => [n.id, n]));
    const level = new Map();
    const depth = (n, seen) => {
      if (level.has(n.id)) return level.get(n.id);
      if (seen.has(n.id)) return 0;
      seen.add(n.id);
      let l = 0;
      for (const i of n.inputs || []) if (byId.has(i.id)) l = Math.max(l, depth(byId.get(i.id), seen) + 1);
      level.set(n.id, l);
      return l;
    };
    plan.nodes.forEach((n) => depth(n, new Set()));
    const cols = [];
    plan.nodes.forEach((n) => { const l = level.get(n.id); (cols[l] = cols[l] || []).push(n); });
    const row = new Map();
    cols.forEach((col) => {
      col.forEach((n, i) => {
        const ins = (n.inputs || []).map((x) => row.get(x.id)).filter((x) => x != null);
        n._key = ins.length ? ins.reduce((a, b) => a + b, 0) / ins.length : i;
      });
      col.sort((a, b) => a._key - b._key);
      col.forEach((n, i) => row.set(n.id, i));
    });
    return { cols, level, byId };
  }

  function curve(x1, y1, x2, y2) {
    const dx = Math.max(30, (x2 - x1) / 2);
    return `M${x1},${y1} C${x1 + dx},${y1} ${x2 - dx},${y2} ${x2},${y2}`;
  }
  const arrowDefs = `<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#9fb0cc"/></marker></defs>`;

  // ---------------------------------------------------------------- routes

  function parseRoute() {
    const parts = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
    if (parts[0] === "jobs" && parts.length === 2) return { name: "job", jid: parts[1] };
    if (parts[0] === "jobs" && parts[2] === "checkpoints" && parts.length === 4) return { name: "checkpoint", jid: parts[1], cid: parts[3] };
    if (parts[0] === "jobs" && parts[2] === "checkpoints" && parts[4] === "cut" && parts.length === 5) return { name: "cut", jid: parts[1], cid: parts[3] };
    return { name: "home" };
  }

  function setCrumbs(route, jobName) {
    const items = [];
    if (route.jid) items.push(`<a href="#/jobs/${esc(route.jid)}">${esc(jobName || route.jid)}</a>`);
    if (route.cid) items.push(`<a href="#/jobs/${esc(route.jid)}/checkpoints/${esc(route.cid)}">checkpoint ${esc(route.cid)}</a>`);
    if (route.name === "cut") items.push(`<span>cut</span>`);
    crumbs.innerHTML = items.join(`<span class="sep">›</span>`);
  }

  async function refresh() {
    clearTimeout(timer);
    const gen = ++generation;
    const route = parseRoute();
    try {
      let html;
      if (route.name === "home") {
        const ov = await api("/jobs/overview");
        if (ov.jobs && ov.jobs.length) {
          location.replace("#/jobs/" + encodeURIComponent(ov.jobs[0].jid));
          return;
        }
        html = `<p class="muted pad">No job.</p>`;
      } else if (route.name === "job") {
        html = await viewJob(route);
      } else if (route.name === "checkpoint") {
        html = await viewCheckpoint(route);
      } else {
        html = await viewCut(route);
      }
      if (gen !== generation) return;
      main.innerHTML = html;
      document.body.dataset.ready = route.name + (route.cid ? ":" + route.cid : "");
      live.classList.remove("stale");
      live.textContent = "live · " + time(Date.now());
    } catch (e) {
      if (gen !== generation) return;
      live.classList.add("stale");
      live.textContent = "disconnected";
      if (!main.querySelector(".card")) main.innerHTML = `<section class="card"><h2>Error</h2><p class="err">${esc(e.message)}</p></section>`;
    } finally {
      if (gen === generation) timer = setTimeout(refresh, REFRESH_MS);
    }
  }

  // ---------------------------------------------------------------- overview

  // throughput returns records in and out per second per vertex: between
  // this refresh and the last, or averaged over the job's run at first.
  function throughput(job) {
    const out = new Map();
    for (const v of job.vertices) {
      const m = v.metrics || {};
      const cur = { t: job.now, r: m["read-records"] || 0, w: m["write-records"] || 0 };
      const key = job.jid + "/" + v.id;
      const prev = samples.get(key);
      let rin, rout;
      if (prev && cur.t - prev.t >= 500 && cur.r >= prev.r && cur.w >= prev.w) {
        const dt = (cur.t - prev.t) / 1000;
        rin = (cur.r - prev.r) / dt;
        rout = (cur.w - prev.w) / dt;
        samples.set(key, cur);
      } else if (prev) {
        rin = prev.rin; rout = prev.rout;
      } else {
        const dt = Math.max(1, job.duration) / 1000;
        rin = cur.r / dt;
        rout = cur.w / dt;
        samples.set(key, cur);
      }
      if (samples.get(key) === cur) { cur.rin = rin; cur.rout = rout; }
      out.set(v.id, { rin, rout });
    }
    return out;
  }

  async function viewJob(route) {
    const jid = encodeURIComponent(route.jid);
    const [job, cps, exc] = await Promise.all([
      api(`/jobs/${jid}`),
      api(`/jobs/${jid}/checkpoints`).catch((e) => ({ error: e.message })),
      api(`/jobs/${jid}/exceptions?maxExceptions=5`).catch(() => null),
    ]);
    const bps = new Map();
    await Promise.all(job.vertices.map((v) => api(`/jobs/${jid}/vertices/${v.id}/backpressure`).then((b) => bps.set(v.id, b), () => {})));
    const rates = throughput(job);
    setCrumbs(route, job.name);
    const tasks = job.vertices.reduce((a, v) => a + v.parallelism, 0);
    let html = `<div class="jobhead"><h1>${esc(job.name)}</h1>${pill(job.state)}
      <span class="meta">job <span class="mono">${esc(job.jid)}</span> · started ${time(job["start-time"])} · ${job["end-time"] > 0 ? "ran" : "running for"} ${span(job.duration)} · ${job.vertices.length} vertices, ${tasks} subtasks</span></div>`;
    html += `<div class="grid">`;
    const failures = (exc && exc.exceptionHistory && exc.exceptionHistory.entries) || [];
    if (failures.length > 0) {
      const rows = failures.map((f) => `<tr><td>${time(f.timestamp, true)}</td><td>${esc(f.taskName || "")}</td><td>${f.failureLabels && f.failureLabels.restarted === "true" ? "restarted" : "ended the job"}</td><td class="mono failure">${esc(f.stacktrace)}</td></tr>`).join("");
      html += card(12, job.state === "RUNNING" || job.state === "FINISHED" ? "Latest failures" : "Why the job is " + job.state.toLowerCase(),
        `<table data-failures="${failures.length}"><thead><tr><th>time</th><th>subtask</th><th></th><th>cause</th></tr></thead><tbody>${rows}</tbody></table>`);
    }
    html += card(12, "Job graph", graphSVG(job, rates, bps),
      `<span class="legend"><span><i style="background:var(--ok)"></i>backpressure ok</span><span><i style="background:var(--warn)"></i>low</span><span><i style="background:var(--bad)"></i>high</span></span>`);
    if (cps.error) {
      html += card(12, "Checkpoints", `<p class="muted">${esc(cps.error)}</p>`);
    } else {
      html += card(8, "Checkpoint history", chartSVG(route.jid, cps.history || []),
        `<span class="legend"><span><i style="background:var(--accent)"></i>end-to-end duration</span><span><i style="background:var(--size)"></i>full size</span><span><i style="background:var(--bad)"></i>failed</span></span>`);
      html += card(4, "Checkpoints", checkpointStats(route.jid, cps));
      html += card(12, "Recent checkpoints", checkpointTable(route.jid, cps.history || []),
        `${num(cps.counts.total)} triggered since the job started`);
    }
    return html + `</div>`;
  }

  function graphSVG(job, rates, bps) {
    const plan = job.plan;
    if (!plan || !plan.nodes || !plan.nodes.length) return `<p class="muted">No plan.</p>`;
    const { cols } = layout(plan);
    const W = 262, H = 96, GX = 80, GY = 22, PAD = 14;
    const tallest = Math.max(...cols.map((c) => c.length));
    const height = PAD * 2 + tallest * H + (tallest - 1) * GY;
    const width = PAD * 2 + cols.length * W + (cols.length - 1) * GX;
    const pos = new Map();
    cols.forEach((col, l) => {
      const colH = col.length * H + (col.length - 1) * GY;
      const y0 = PAD + (height - 2 * PAD - colH) / 2;
      col.forEach((n, i) => pos.set(n.id, { x: PAD + l * (W + GX), y: y0 + i * (H + GY) }));
    });
    let edges = "", nodes = "";
    for (const n of plan.nodes) {
      const to = pos.get(n.id);
      for (const inp of n.inputs || []) {
        const from = pos.get(inp.id);
        if (!from) continue;
        const x1 = from.x + W, y1 = from.y + H / 2, x2 = to.x - 2, y2 = to.y + H / 2;
        edges += `<path class="g-edge" d="${curve(x1, y1, x2, y2)}" marker-end="url(#arrow)"><title>${esc(vertexName(job, inp.id))} → ${esc(vertexName(job, n.id))} (${esc(inp.ship_strategy)})</title></path>`;
        edges += `<text class="g-edge-label" x="${(x1 + x2) / 2}" y="${(y1 + y2) / 2 - 5}" text-anchor="middle">${esc(inp.ship_strategy)}</text>`;
      }
    }
    for (const n of plan.nodes) {
      const p = pos.get(n.id);
      const v = job.vertices.find((x) => x.id === n.id) || { name: n.description, parallelism: n.parallelism, status: "" };
      const r = rates.get(n.id) || {};
      const bp = bps.get(n.id);
      const ratio = bp ? Math.max(0, ...bp.subtasks.map((s) => s.ratio || 0)) : 0;
      const level = bp ? bp["backpressure-level"] : "ok";
      const color = level === "high" ? "var(--bad)" : level === "low" ? "var(--warn)" : "var(--ok)";
      const src = !(n.inputs && n.inputs.length);
      const inText = src ? "source" : "in " + rate(r.rin);
      nodes += `<g class="g-node${src ? " src" : ""}" data-vertex="${esc(v.name)}" data-vertex-id="${esc(n.id)}" transform="translate(${p.x},${p.y})">
        <title>${esc(v.name)}\n${esc(n.id)}\nparallelism ${v.parallelism}, ${esc(v.status)}</title>
        <rect class="box" width="${W}" height="${H}" rx="9"/>
        <rect x="0" y="0" width="5" height="${H}" rx="2" fill="${src ? "#6ea8ff" : "#c9d3e3"}"/>
        <text class="name" x="16" y="22">${esc(trunc(v.name, 33))}</text>
        <text class="sub" x="16" y="40">parallelism ${v.parallelism} · ${esc(String(v.status).toLowerCase())}</text>
        <text class="rate" x="16" y="60">${esc(inText)}</text>
        <text class="rate" x="${W - 14}" y="60" text-anchor="end">out ${esc(rate(r.rout))}</text>
        <rect x="16" y="73" width="${W - 32}" height="6" rx="3" fill="#edf0f5"/>
        <rect x="16" y="73" width="${Math.max(4, (W - 32) * Math.min(1, ratio))}" height="6" rx="3" fill="${color}"/>
        <text class="sub" x="16" y="92">backpressure ${esc(level || "ok")} · ${Math.round(ratio * 100)}%</text>
      </g>`;
    }
    return `<svg class="graph" viewBox="0 0 ${width} ${height}" width="${width}" role="img" aria-label="job graph">${arrowDefs}${edges}${nodes}</svg>`;
  }

  function chartSVG(jid, history) {
    const cps = history.slice(0, 30).reverse();
    if (!cps.length) return `<p class="muted">No checkpoint yet.</p>`;
    const W = 820, H = 250, L = 62, R = 70, T = 16, B = 36;
    const iw = W - L - R, ih = H - T - B;
    const dur = (c) => Math.max(0, c.end_to_end_duration || 0);
    const sd = scale(Math.max(1, ...cps.map(dur)), 1);
    // Sizes are scaled in the unit they are shown in (B, KB, MB), so the
    // ticks are round numbers.
    const big = Math.max(1, ...cps.map((c) => Math.max(c.state_size || 0, c.checkpointed_size || 0)));
    const unit = big >= 1048576 ? 1048576 : big >= 1024 ? 1024 : 1;
    const ss = scale(big / unit, 1);
    ss.step *= unit;
    ss.max *= unit;
    const maxD = sd.max, maxS = ss.max;
    const slot = iw / cps.length, bw = Math.max(4, Math.min(34, slot * 0.6));
    let g = "";
    for (let i = 0; i <= sd.ticks; i++) {
      const y = T + ih - (ih * i) / sd.ticks;
      g += `<line class="axis" x1="${L}" x2="${W - R}" y1="${y}" y2="${y}"/>`;
      g += `<text class="axis-label" x="${L - 8}" y="${y + 4}" text-anchor="end">${ms(sd.step * i)}</text>`;
    }
    for (let i = 0; i <= ss.ticks; i++) {
      const y = T + ih - (ih * i) / ss.ticks;
      g += `<text class="axis-label" x="${W - R + 8}" y="${y + 4}">${bytes(ss.step * i)}</text>`;
    }
    const every = Math.ceil(cps.length / 15);
    let bars = "", pts = [];
    cps.forEach((c, i) => {
      const cx = L + slot * i + slot / 2;
      const failed = c.status === "FAILED";
      const h = failed ? ih : Math.max(2, (ih * dur(c)) / maxD);
      const fill = failed ? "var(--bad-soft)" : c.status === "IN_PROGRESS" ? "#c9d3e3" : "var(--accent)";
      bars += `<a href="#/jobs/${esc(jid)}/checkpoints/${c.id}"><rect data-checkpoint="${c.id}" x="${cx - bw / 2}" y="${T + ih - h}" width="${bw}" height="${h}" rx="3" fill="${fill}"${failed ? ` stroke="var(--bad)" stroke-dasharray="3 2"` : ""}><title>checkpoint ${c.id} · ${esc(c.status)}\nduration ${ms(c.end_to_end_duration)}\nfull size ${bytes(c.state_size)}, checkpointed ${bytes(c.checkpointed_size)}</title></rect></a>`;
      if (failed) bars += `<text x="${cx}" y="${T + 14}" text-anchor="middle" fill="var(--bad)" font-weight="700" font-size="13">✕</text>`;
      if (i % every === 0) bars += `<text class="axis-label" x="${cx}" y="${H - B + 16}" text-anchor="middle">${c.id}</text>`;
      if (!failed && c.state_size >= 0) pts.push([cx, T + ih - (ih * c.state_size) / maxS]);
    });
    const line = pts.length ? `<polyline points="${pts.map((p) => p.join(",")).join(" ")}" fill="none" stroke="var(--size)" stroke-width="2"/>` +
      pts.map((p) => `<circle cx="${p[0]}" cy="${p[1]}" r="3.2" fill="#fff" stroke="var(--size)" stroke-width="2"/>`).join("") : "";
    const axisText = `<text class="axis-label" x="${L + iw / 2}" y="${H - 3}" text-anchor="middle">checkpoint id</text>`;
    return `<svg class="chart" viewBox="0 0 ${W} ${H}" role="img" aria-label="checkpoint durations and sizes">${g}${bars}${line}${axisText}</svg>`;
  }

  function checkpointStats(jid, cps) {
    const c = cps.counts, lc = cps.latest && cps.latest.completed, lf = cps.latest && cps.latest.failed;
    let h = `<div class="stats">${stat("Completed", num(c.completed))}${stat("Failed", num(c.failed))}${stat("In progress", num(c.in_progress))}${stat("Restored", num(c.restored))}</div>`;
    h += `<hr style="border:0;border-top:1px solid var(--line);margin:14px 0">`;
    if (lc) {
      h += `<div class="muted" style="font-size:12px;margin-bottom:6px">LATEST COMPLETED</div><div class="stats" data-latest-completed="${lc.id}">
        ${stat("Checkpoint", `<a href="#/jobs/${esc(jid)}/checkpoints/${lc.id}">#${lc.id}</a>`, `<a href="#/jobs/${esc(jid)}/checkpoints/${lc.id}/cut">cut →</a>`)}
        ${stat("Triggered", time(lc.trigger_timestamp))}
        ${stat("Duration", ms(lc.end_to_end_duration))}
        ${stat("Full size", bytes(lc.state_size), lc.checkpointed_size !== lc.state_size ? bytes(lc.checkpointed_size) + " checkpointed" : "")}
        ${stat("Alignment buffered", bytes(lc.alignment_buffered))}
        ${stat("Acknowledged", num(lc.num_acknowledged_subtasks) + "/" + num(lc.num_subtasks))}
      </div>`;
    } else {
      h += `<p class="muted">No completed checkpoint yet.</p>`;
    }
    if (lf) h += `<p class="err" style="margin:12px 0 0">Latest failure: #${lf.id}${lf.failure_message ? " — " + esc(lf.failure_message) : ""}</p>`;
    return h;
  }

  function checkpointTable(jid, history) {
    if (!history.length) return `<p class="muted">No checkpoint yet.</p>`;
    const rows = history.slice(0, 15).map((c) => {
      const link = `#/jobs/${esc(jid)}/checkpoints/${c.id}`;
      return `<tr id="cp-row-${c.id}" data-checkpoint-id="${c.id}" data-status="${esc(c.status)}" class="${c.status === "FAILED" ? "failed" : ""}">
        <td><a href="${link}">#${c.id}</a></td><td>${pill(c.status)}</td>
        <td>${time(c.trigger_timestamp, true)}</td>
        <td class="num">${num(c.num_acknowledged_subtasks)}/${num(c.num_subtasks)}</td>
        <td class="num">${ms(c.end_to_end_duration)}</td>
        <td class="num">${bytes(c.checkpointed_size)}</td>
        <td class="num">${bytes(c.state_size)}</td>
        <td class="num">${bytes(c.alignment_buffered)}</td>
        <td><a href="${link}">details</a>${c.status === "COMPLETED" ? ` · <a href="${link}/cut">cut</a>` : ""}${c.failure_message ? ` <span class="err">${esc(trunc(c.failure_message, 60))}</span>` : ""}</td>
      </tr>`;
    }).join("");
    return `<div class="tablewrap"><table class="checkpoints"><thead><tr><th>ID</th><th>Status</th><th>Triggered</th><th class="num">Acknowledged</th><th class="num">End to end</th><th class="num">Checkpointed size</th><th class="num">Full size</th><th class="num">Aligned buffered</th><th></th></tr></thead><tbody>${rows}</tbody></table></div>`;
  }

  // ---------------------------------------------------------------- checkpoint

  async function viewCheckpoint(route) {
    const jid = encodeURIComponent(route.jid), cid = encodeURIComponent(route.cid);
    const [job, cp] = await Promise.all([api(`/jobs/${jid}`), api(`/jobs/${jid}/checkpoints/details/${cid}`)]);
    setCrumbs(route, job.name);
    const ids = Object.keys(cp.tasks || {});
    const subs = new Map();
    await Promise.all(ids.map((vid) => api(`/jobs/${jid}/checkpoints/details/${cid}/subtasks/${vid}`).then((s) => subs.set(vid, s), () => {})));
    const { cols } = layout(job.plan);
    const order = cols.flat().map((n) => n.id).filter((id) => ids.includes(id));
    let html = `<div class="jobhead"><h1>Checkpoint ${esc(cp.id)}</h1>${pill(cp.status)}
      <span class="meta">${esc(job.name)} · triggered ${time(cp.trigger_timestamp, true)} · ${cp.is_savepoint ? "savepoint" : esc(String(cp.checkpoint_type || "checkpoint").toLowerCase())}</span>
      ${cp.status === "COMPLETED" ? `<a href="#/jobs/${esc(route.jid)}/checkpoints/${esc(route.cid)}/cut" style="margin-left:auto">View the cut →</a>` : ""}</div><div class="grid">`;
    html += card(12, "Summary", `<div class="stats" style="grid-template-columns:repeat(6,1fr)">
      ${stat("End to end", ms(cp.end_to_end_duration))}
      ${stat("Full size", bytes(cp.state_size))}
      ${stat("Checkpointed size", bytes(cp.checkpointed_size))}
      ${stat("Alignment buffered", bytes(cp.alignment_buffered))}
      ${stat("Acknowledged", num(cp.num_acknowledged_subtasks) + "/" + num(cp.num_subtasks))}
      ${stat("Latest ack", time(cp.latest_ack_timestamp, true))}</div>
      ${cp.external_path ? `<p class="muted mono" style="margin:12px 0 0">${esc(cp.external_path)}</p>` : ""}
      ${cp.failure_message ? `<p class="err">${esc(cp.failure_message)}</p>` : ""}`);
    const maxE2E = Math.max(1, ...[...subs.values()].flatMap((s) => (s.subtasks || []).map((x) => x.end_to_end_duration || 0)));
    let rows = "";
    for (const vid of order) {
      const t = cp.tasks[vid], s = subs.get(vid);
      rows += `<tr class="group" data-vertex="${esc(vertexName(job, vid))}"><td colspan="2">${esc(vertexName(job, vid))}</td><td>${pill(t.status)}</td>
        <td class="num">${num(t.num_acknowledged_subtasks)}/${num(t.num_subtasks)}</td><td class="num">${ms(t.end_to_end_duration)}</td>
        <td class="num">${bytes(t.state_size)}</td><td colspan="6"></td></tr>`;
      for (const st of (s && s.subtasks) || []) {
        const done = st.status === "completed";
        const seg = (v, c) => `<span style="width:${(60 * Math.max(0, v || 0)) / maxE2E}px;background:${c};display:inline-block;height:8px"></span>`;
        rows += `<tr><td></td><td>#${st.index}</td><td>${pill(st.status)}</td><td class="num">${done ? time(st.ack_timestamp, true) : "–"}</td>
          <td class="num">${done ? ms(st.end_to_end_duration) : "–"}</td><td class="num">${done ? bytes(st.state_size) : "–"}</td>
          <td class="num">${done ? ms(st.checkpoint.sync) : "–"}</td><td class="num">${done ? ms(st.checkpoint.async) : "–"}</td>
          <td class="num">${done ? ms(st.alignment.duration) : "–"}</td><td class="num">${done ? bytes(st.alignment.buffered) : "–"}</td>
          <td class="num">${done ? ms(st.start_delay) : "–"}</td>
          <td><span class="bar" style="width:62px;background:none" title="start delay, alignment, sync, async">${done ? seg(st.start_delay, "#c9d3e3") + seg(st.alignment.duration, "var(--warn)") + seg(st.checkpoint.sync, "var(--accent)") + seg(st.checkpoint.async, "var(--size)") : ""}</span></td></tr>`;
      }
    }
    html += card(12, "Per operator and subtask", `<div class="tablewrap"><table><thead><tr><th>Operator</th><th>Subtask</th><th>Status</th><th class="num">Acknowledged</th><th class="num">End to end</th><th class="num">State size</th><th class="num">Sync</th><th class="num">Async</th><th class="num">Alignment</th><th class="num">Aligned buffered</th><th class="num">Start delay</th><th>Timeline</th></tr></thead><tbody>${rows}</tbody></table></div>`,
      `<span class="legend"><span><i style="background:#c9d3e3"></i>start delay</span><span><i style="background:var(--warn)"></i>alignment</span><span><i style="background:var(--accent)"></i>sync</span><span><i style="background:var(--size)"></i>async</span></span>`);
    return html + `</div>`;
  }

  // ---------------------------------------------------------------- cut

  async function cutOf(jid, cid, fresh) {
    const key = jid + "/" + cid;
    if (!fresh && cuts.has(key)) return cuts.get(key);
    const c = await api(`/jobs/${encodeURIComponent(jid)}/checkpoints/${encodeURIComponent(cid)}/cut`);
    // A retained checkpoint may be discarded while it is shown: keep the
    // positions and state read while its metadata was there.
    const old = cuts.get(key);
    if (old && old.metadata.available && !c.metadata.available) {
      return Object.assign({}, c, { metadata: old.metadata, sources: old.sources, operators: old.operators });
    }
    cuts.set(key, c);
    return c;
  }

  // replayOf says, per split, how far (in offsets) after the cut a restore
  // would read again: the REST API's count when the job reports current
  // positions, else at least the records up to the latest completed
  // checkpoint's position.
  function replayOf(cut, latest) {
    const later = new Map();
    if (latest && latest.checkpoint_id > cut.checkpoint_id) {
      for (const s of latest.sources) for (const sp of s.splits) later.set(s.uid + "/" + sp.split, sp.offset);
    }
    return (src, sp) => {
      if (sp.offsets_to_replay != null) return { n: sp.offsets_to_replay, exact: true };
      const l = later.get(src.uid + "/" + sp.split);
      if (l != null && sp.offset >= 0 && l >= sp.offset) return { n: l - sp.offset, exact: false, through: latest.checkpoint_id };
      return null;
    };
  }

  async function viewCut(route) {
    const jid = encodeURIComponent(route.jid);
    const [job, cut, cps] = await Promise.all([
      api(`/jobs/${jid}`),
      cutOf(route.jid, route.cid, true),
      api(`/jobs/${jid}/checkpoints`).catch(() => null),
    ]);
    setCrumbs(route, job.name);
    let latest = null;
    const needLatest = cut.sources.some((s) => s.splits.some((sp) => sp.offsets_to_replay == null));
    const lc = cps && cps.latest && cps.latest.completed;
    if (needLatest && lc && lc.id > cut.checkpoint_id) latest = await cutOf(route.jid, String(lc.id)).catch(() => null);
    const replay = replayOf(cut, latest);
    const vmap = new Map(cut.vertices.map((v) => [v.id, v]));
    let html = `<div class="jobhead"><h1>Cut of checkpoint ${esc(cut.checkpoint_id)}</h1>${pill(cut.status || "retained")}
      <span class="meta">${esc(job.name)} · triggered ${time(cut.trigger_timestamp, true)} · took ${ms(cut.end_to_end_duration)} · full size ${bytes(cut.state_size)}</span>
      <a href="#/jobs/${esc(route.jid)}/checkpoints/${esc(route.cid)}" style="margin-left:auto">Per-subtask details →</a></div>`;
    html += `<p class="note">A restore from checkpoint ${esc(cut.checkpoint_id)} loads every operator's state below and rewinds every source to its position S<sub>${esc(cut.checkpoint_id)}</sub>. Each subtask waited, from the first barrier to reach it, until the barrier had arrived on all of its input channels (alignment), holding back the records behind the barrier on the channels that delivered it early. Those records and everything the sources read after S<sub>${esc(cut.checkpoint_id)}</sub> are after the cut: a restore replays them from the sources.${cut.channels.some((c) => c.in_flight_records > 0) ? ` This checkpoint was unaligned: its barriers overtook the records queued on the dashed channels, which were persisted with it and are read first on restore.` : ""}</p>`;
    html += `<div class="grid">`;
    if (!cut.metadata.available) html += card(12, "Metadata", `<p class="err">${esc(cut.metadata.reason)}</p>`);
    html += card(12, "The cut", cutSVG(job, cut, vmap, replay),
      `<span class="legend"><span><i style="background:#6ea8ff"></i>source position S<sub>k</sub></span><span><i style="background:var(--warn)"></i>offset after the cut</span><span><i style="background:var(--size)"></i>state size</span></span>`);
    html += card(5, "Source positions at the cut", sourceTable(cut, replay), cut.metadata.path ? `<span class="mono" title="${esc(cut.metadata.path)}">${esc(trunc(cut.metadata.path.split("/").slice(-2).join("/"), 40))}</span>` : "");
    html += card(7, "Operator state", operatorTable(job, cut));
    html += card(12, "Channels and barriers", channelTable(job, cut, vmap), `timing per consuming subtask, relative to the trigger at ${time(cut.trigger_timestamp, true)}`);
    return html + `</div>`;
  }

  function cutSVG(job, cut, vmap, replay) {
    const { cols } = layout(job.plan);
    const W = 226, SW = 290, GX = 70, PAD = 14, HEAD = 48, ROW = 22, GY = 20;
    const splits = [];
    for (const s of cut.sources) for (const sp of s.splits) splits.push({ src: s, sp });
    const boxH = (p) => HEAD + p * ROW + 8;
    const colHeights = cols.map((col) => col.reduce((a, n) => a + boxH(n.parallelism), 0) + (col.length - 1) * GY);
    const splitH = HEAD + Math.max(1, splits.length) * ROW + 8;
    const height = PAD * 2 + Math.max(splitH, ...colHeights);
    const width = PAD * 2 + SW + cols.length * (W + GX);
    const pos = new Map();
    cols.forEach((col, l) => {
      let y = PAD + (height - 2 * PAD - colHeights[l]) / 2;
      col.forEach((n) => { pos.set(n.id, { x: PAD + SW + GX + l * (W + GX), y, p: n.parallelism }); y += boxH(n.parallelism) + GY; });
    });
    const rowY = (id, i) => pos.get(id).y + HEAD + i * ROW + ROW / 2;
    let arrows = "", boxes = "";
    // Sources' splits on the left.
    const sy = PAD + (height - 2 * PAD - splitH) / 2;
    boxes += `<g transform="translate(${PAD},${sy})"><rect width="${SW}" height="${splitH}" rx="9" fill="#f5f9ff" stroke="#7aa7f7"/>
      <text x="14" y="21" font-weight="650" font-size="13">Source positions S<tspan baseline-shift="sub" font-size="9">${esc(cut.checkpoint_id)}</tspan></text>
      <text x="14" y="38" font-size="11.5" fill="var(--muted)">split · restore resumes at · after the cut</text>`;
    splits.forEach(({ src, sp }, i) => {
      const y = HEAD + i * ROW;
      const r = replay(src, sp);
      boxes += `<g class="cut-split" data-split="${esc(sp.split)}" data-offset="${sp.offset}"><title>${esc(src.name)} · ${esc(sp.split)} · subtask ${sp.subtask}\nrestore resumes at offset ${sp.offset}${sp.ended ? " (ended)" : ""}${r ? `\n${r.exact ? "" : "at least "}${r.n} (offset units) after the cut` : ""}</title>
        <rect x="8" y="${y + 2}" width="${SW - 16}" height="${ROW - 4}" rx="4" fill="${i % 2 ? "#f5f9ff" : "#e9f1ff"}"/>
        <text x="16" y="${y + 15}" font-family="var(--mono)" font-size="11">${esc(trunc(sp.split, 20))}</text>
        <text x="${SW - 80}" y="${y + 15}" text-anchor="end" font-weight="650" font-size="12">${sp.offset < 0 ? "start" : num(sp.offset)}</text>
        <text x="${SW - 14}" y="${y + 15}" text-anchor="end" font-size="11" fill="var(--warn)">${r ? (r.exact ? "+" : "≥ ") + num(r.n) : ""}</text></g>`;
      if (pos.has(src.vertex)) {
        const to = pos.get(src.vertex);
        const sub = Math.min(sp.subtask, to.p - 1);
        arrows += `<path d="${curve(PAD + SW, sy + y + ROW / 2, to.x - 2, rowY(src.vertex, sub))}" fill="none" stroke="#7aa7f7" stroke-width="1.2" marker-end="url(#arrow)" opacity=".8"/>`;
      }
    });
    boxes += `</g>`;
    // Channels: one arrow per edge and consuming subtask.
    for (const n of job.plan.nodes) {
      for (const inp of n.inputs || []) {
        const from = pos.get(inp.id), to = pos.get(n.id);
        if (!from || !to) continue;
        for (let j = 0; j < to.p; j++) {
          const chans = cut.channels.filter((c) => c.from === inp.id && c.to === n.id && c.to_subtask === j);
          const a = chans.length ? chans[0].alignment_duration : null;
          const fr = chans.reduce((s, c) => s + (c.in_flight_records || 0), 0);
          const fb = chans.reduce((s, c) => s + (c.in_flight_bytes || 0), 0);
          const y1 = from.y + HEAD / 2 + 4;
          arrows += `<path class="g-edge" data-in-flight="${fr}" d="${curve(from.x + W, y1, to.x - 2, rowY(n.id, j))}" marker-end="url(#arrow)" stroke-width="${a > 0 || fr > 0 ? 2.2 : 1.2}" ${fr > 0 ? `stroke="var(--size)" stroke-dasharray="5 3"` : a > 0 ? `stroke="var(--warn)"` : ""} opacity=".85"><title>${chans.length} channel${chans.length === 1 ? "" : "s"} ${esc(vertexName(job, inp.id))} → ${esc(vertexName(job, n.id))} #${j} (${esc(inp.ship_strategy)})\nalignment ${ms(a)}${fr > 0 ? `\nin flight at the cut: ${num(fr)} records (${bytes(fb)}), persisted with the checkpoint and replayed first on restore` : ""}</title></path>`;
        }
      }
    }
    // Operators as boxes with state per subtask.
    for (const [id, p] of pos) {
      const v = vmap.get(id) || { name: vertexName(job, id), subtasks: [] };
      const total = v.subtasks.reduce((a, s) => a + (s.state_size || 0), 0);
      const bySub = new Map(v.subtasks.map((s) => [s.index, s]));
      let rows = "";
      for (let i = 0; i < p.p; i++) {
        const s = bySub.get(i);
        const y = HEAD + i * ROW;
        rows += `<g data-subtask="${i}"><title>${esc(v.name)} #${i}${s ? `\nfirst barrier +${ms(s.start_delay)} after the trigger, last +${ms(s.start_delay + s.alignment_duration)}\naligned ${ms(s.alignment_duration)}, sync ${ms(s.sync_duration)}, async ${ms(s.async_duration)}\nstate ${bytes(s.state_size)}` : ""}</title>
          <rect x="8" y="${y + 2}" width="${W - 16}" height="${ROW - 4}" rx="4" fill="${i % 2 ? "#fafbfd" : "#f3f6fb"}"/>
          <text x="16" y="${y + 15}" font-size="11.5" fill="var(--muted)">#${i}</text>
          <text x="44" y="${y + 15}" font-size="11.5" fill="var(--size)" font-weight="600">${s ? bytes(s.state_size) : "–"}</text>
          <text x="${W - 14}" y="${y + 15}" font-size="11.5" text-anchor="end" fill="${s && s.alignment_duration > 0 ? "var(--warn)" : "var(--muted)"}">${s ? (s.finished ? "finished" : "aligned " + ms(s.alignment_duration)) : "no stats"}</text></g>`;
      }
      boxes += `<g class="g-node cut-op" data-vertex="${esc(v.name)}" data-state-size="${total}" transform="translate(${p.x},${p.y})">
        <rect class="box" width="${W}" height="${boxH(p.p)}" rx="9"/>
        <text class="name" x="14" y="21">${esc(trunc(v.name, 28))}</text>
        <text class="sub" x="14" y="38">state <tspan fill="var(--size)" font-weight="650">${bytes(total)}</tspan> · parallelism ${p.p}</text>${rows}</g>`;
    }
    return `<svg class="cut" viewBox="0 0 ${width} ${height}" role="img" aria-label="the cut">${arrowDefs}${arrows}${boxes}</svg>`;
  }

  function sourceTable(cut, replay) {
    if (!cut.sources.length) return `<p class="muted">${cut.metadata.available ? "The job has no source." : "Positions need the checkpoint's metadata."}</p>`;
    let rows = "";
    let approx = false;
    const now = cut.sources.some((s) => s.splits.some((sp) => sp.current_offset != null));
    for (const s of cut.sources) {
      rows += `<tr class="group"><td colspan="${now ? 5 : 4}">${esc(s.name)}${s.error ? ` <span class="err">${esc(s.error)}</span>` : ""}</td></tr>`;
      for (const sp of s.splits) {
        const r = replay(s, sp);
        if (r && !r.exact) approx = true;
        rows += `<tr class="split" data-split="${esc(sp.split)}" data-offset="${sp.offset}"><td class="mono">${esc(sp.split)}</td><td class="num">#${sp.subtask}</td>
          <td class="num"><b>${sp.offset < 0 ? "start" : num(sp.offset)}</b>${sp.ended ? " (ended)" : ""}</td>
          ${now ? `<td class="num">${sp.current_offset != null ? num(sp.current_offset) : "–"}</td>` : ""}
          <td class="num" style="color:var(--warn)">${r ? (r.exact ? "" : "≥ ") + num(r.n) : "–"}</td></tr>`;
      }
    }
    const foot = `<p class="muted" style="font-size:12px;margin:8px 0 0">Offsets are the source's own positions: bytes for files and generated traces, records for Kafka and datagen.${approx ? " ≥: up to the latest completed checkpoint; a restore replays at least this much." : ""}</p>`;
    return `<div class="tablewrap"><table><thead><tr><th>Split</th><th class="num">Subtask</th><th class="num">Offset S<sub>k</sub></th>${now ? `<th class="num">Now</th>` : ""}<th class="num">After cut</th></tr></thead><tbody>${rows}</tbody></table></div>${foot}`;
  }

  function operatorTable(job, cut) {
    if (!cut.operators.length) return `<p class="muted">No operator state (metadata unavailable).</p>`;
    const rows = cut.operators.map((o) => {
      const per = o.subtasks.map((s) => bytes(s.state_size)).join(" · ");
      const kg = o.subtasks.filter((s) => s.key_groups).map((s) => `${s.key_groups.start}–${s.key_groups.end}`).join(", ");
      return `<tr data-operator="${esc(o.uid)}" title="key groups per subtask: ${esc(kg || "none")}"><td><b>${esc(o.uid)}</b></td><td>${o.vertex ? esc(vertexName(job, o.vertex)) : `<span class="muted">chained</span>`}</td>
        <td class="num">${o.parallelism}</td><td class="num" style="color:var(--size);font-weight:650">${bytes(o.state_size)}</td>
        <td class="muted" style="font-size:12px">${per}</td></tr>`;
    }).join("");
    return `<div class="tablewrap"><table><thead><tr><th>Operator</th><th>Vertex</th><th class="num">Parallelism</th><th class="num">State</th><th>Per subtask</th></tr></thead><tbody>${rows}</tbody></table></div>`;
  }

  function channelTable(job, cut, vmap) {
    if (!cut.channels.length) return `<p class="muted">No channel.</p>`;
    const groups = new Map();
    for (const c of cut.channels) {
      const k = c.edge + "/" + c.to_subtask;
      if (!groups.has(k)) groups.set(k, []);
      groups.get(k).push(c);
    }
    let rows = "";
    for (const chans of groups.values()) {
      const c = chans[0];
      const v = vmap.get(c.to);
      const s = v && v.subtasks.find((x) => x.index === c.to_subtask);
      const timed = c.alignment_duration != null;
      rows += `<tr data-edge="${c.edge}" data-to-subtask="${c.to_subtask}"><td>${esc(vertexName(job, c.from))} <span class="muted">#${chans.map((x) => x.from_subtask).join(", #")}</span></td>
        <td>→ ${esc(vertexName(job, c.to))} <span class="muted">#${c.to_subtask}</span></td><td>${esc(c.ship_strategy)}</td><td class="num">${chans.length}</td>
        <td class="num">${timed ? "+" + ms(c.start_delay) : "–"} <span class="muted" style="font-size:12px">${s && timed ? time(s.first_barrier_timestamp, true) : ""}</span></td>
        <td class="num">${timed ? "+" + ms(c.start_delay + c.alignment_duration) : "–"} <span class="muted" style="font-size:12px">${s && timed ? time(s.last_barrier_timestamp, true) : ""}</span></td>
        <td class="num" style="${timed && c.alignment_duration > 0 ? "color:var(--warn);font-weight:650" : ""}">${timed ? ms(c.alignment_duration) : "–"}</td></tr>`;
    }
    return `<div class="tablewrap"><table><thead><tr><th>From (producer subtasks)</th><th>To (consuming subtask)</th><th>Ship strategy</th><th class="num">Channels</th><th class="num">First barrier</th><th class="num">Last barrier</th><th class="num">Waited</th></tr></thead><tbody>${rows}</tbody></table></div>`;
  }

  window.addEventListener("hashchange", () => { main.innerHTML = `<p class="muted pad">Loading…</p>`; refresh(); });
  refresh();
})();
