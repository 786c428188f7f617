/// The admin listener's `GET /` page: one self-contained HTML document (no external assets)
/// that polls `/stats` every second and draws what it reads. Every number shown also carries its
/// raw value in a `data-value` attribute, which is what the browser test compares with `/stats`.
/// Its own polls are admin requests, so the request counts and rates it shows leave `admin` out.
/// The chart draws the daemon's own history (`/stats` `history`), so it is full when the page
/// opens; the failures list and the routes come from `/stats` as they are. Everything the page
/// writes from `/stats` text goes through `escape` (a URL or a route is the clients' text).
enum Dashboard {
    static let html = """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>Larder</title>
        <style>
          :root { --bg:#f6f7f9; --card:#fff; --ink:#1d2433; --muted:#6b7385; --accent:#2f6fde; --ok:#1a9e5f; --warn:#c7861a; --bad:#c9364b; }
          * { box-sizing: border-box; }
          body { margin:0; font:14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; background:var(--bg); color:var(--ink); }
          header { display:flex; align-items:baseline; gap:1rem; padding:1rem 1.5rem; background:var(--ink); color:#fff; }
          header h1 { margin:0; font-size:1.3rem; }
          header span { color:#b8c0d0; }
          #state { margin-left:auto; }
          main { padding:1rem 1.5rem; display:grid; gap:1rem; grid-template-columns:repeat(auto-fill, minmax(210px, 1fr)); }
          .card { background:var(--card); border-radius:8px; padding:0.9rem 1rem; box-shadow:0 1px 2px rgba(0,0,0,.08); }
          .card h2 { margin:0 0 .3rem; font-size:.8rem; font-weight:600; color:var(--muted); text-transform:uppercase; letter-spacing:.04em; }
          .big { font-size:1.9rem; font-weight:650; }
          .sub { color:var(--muted); font-size:.85rem; }
          .wide { grid-column:1 / -1; }
          .bar { height:10px; background:#e3e7ee; border-radius:5px; overflow:hidden; margin:.4rem 0; }
          .bar > div { height:100%; background:var(--accent); width:0; }
          canvas { width:100%; height:220px; display:block; }
          .legend span { display:inline-block; margin-right:1rem; font-size:.85rem; }
          .legend i { display:inline-block; width:.8rem; height:.8rem; border-radius:2px; margin-right:.3rem; vertical-align:-1px; }
          table { width:100%; border-collapse:collapse; }
          th, td { text-align:left; padding:.35rem .4rem; border-bottom:1px solid #edf0f4; }
          th { color:var(--muted); font-weight:600; font-size:.8rem; }
          td.num, th.num { text-align:right; font-variant-numeric:tabular-nums; }
          .axis { position:relative; height:1.1rem; color:var(--muted); font-size:.75rem; margin-top:.2rem; }
          .axis span { position:absolute; transform:translateX(-50%); }
          .badge { display:inline-block; padding:.1rem .5rem; border-radius:999px; font-size:.8rem; font-weight:600; background:var(--bad); color:#fff; }
          #badges { display:flex; gap:.4rem; }
          .classes { display:flex; height:10px; border-radius:5px; overflow:hidden; background:#e3e7ee; margin:.4rem 0; }
          .classes > div { height:100%; }
        </style>
        </head>
        <body>
        <header><h1>Larder</h1><span id="version"></span><span id="uptime" data-value="0"></span><span id="badges"></span><span id="state">connecting…</span></header>
        <main>
          <section class="card"><h2>Hit ratio</h2><div class="big" id="hit-ratio" data-value="0">–</div><div class="sub">answered from cache</div></section>
          <section class="card"><h2>Requests</h2><div class="big" id="requests-total" data-value="0">–</div><div class="sub"><span id="request-rate" data-value="0">– /s</span></div></section>
          <section class="card"><h2>Bandwidth saved</h2><div class="big" id="bytes-cache" data-value="0">–</div><div class="sub">served from cache</div></section>
          <section class="card"><h2>From upstream</h2><div class="big" id="bytes-upstream" data-value="0">–</div><div class="sub">fetched from origins</div></section>
          <section class="card"><h2>Memory</h2><div class="bar"><div id="memory-fill"></div></div>
            <div class="sub"><span id="memory-bytes" data-value="0">–</span> of <span id="memory-max">–</span> · <span id="memory-entries" data-value="0">–</span> entries</div></section>
          <section class="card"><h2>Disk</h2><div class="bar"><div id="disk-fill"></div></div>
            <div class="sub"><span id="disk-bytes" data-value="0">–</span> of <span id="disk-max">–</span> · <span id="disk-entries" data-value="0">–</span> entries</div></section>
          <section class="card"><h2>Coalescing</h2><div class="big" id="coalesced" data-value="0">–</div><div class="sub">requests shared a fetch · <span id="fills" data-value="0">–</span> fetches</div></section>
          <section class="card"><h2>Retries</h2><div class="big" id="retries" data-value="0">–</div><div class="sub"><span id="failures" data-value="0">–</span> final failures · <span id="stale-if-error" data-value="0">–</span> stale answers</div></section>
          <section class="card"><h2>Responses</h2><div class="classes" id="classes-bar"></div>
            <div class="sub"><span id="status-2xx" data-value="0">–</span> 2xx · <span id="status-3xx" data-value="0">–</span> 3xx ·
            <span id="status-4xx" data-value="0">–</span> 4xx · <span id="status-5xx" data-value="0">–</span> 5xx</div></section>
          <section class="card"><h2>Hit latency</h2><div class="big"><span id="latency-hit-p50" data-value="">–</span></div>
            <div class="sub">p50; p99 <span id="latency-hit-p99" data-value="">–</span> · <span id="latency-hit-count" data-value="0">–</span> hits</div></section>
          <section class="card"><h2>Miss latency</h2><div class="big"><span id="latency-miss-p50" data-value="">–</span></div>
            <div class="sub">p50; p99 <span id="latency-miss-p99" data-value="">–</span> · <span id="latency-miss-count" data-value="0">–</span> misses</div></section>
          <section class="card"><h2>Connections</h2><div class="big" id="connections" data-value="0">–</div><div class="sub"><span id="accepted" data-value="0">–</span> accepted</div></section>
          <section class="card wide"><h2>Requests per second by outcome</h2><canvas id="chart" width="1200" height="220"></canvas>
            <div class="axis" id="time-axis"><span style="left:0;transform:none">15 min ago</span><span style="left:25%">11 min ago</span>
              <span style="left:50%">7.5 min ago</span><span style="left:75%">3.8 min ago</span><span style="right:0;transform:none">now</span></div>
            <div class="legend" id="legend"></div>
            <div class="sub"><span id="history-samples" data-value="0">–</span> samples kept by the daemon, one every
              <span id="history-interval" data-value="0">–</span> · <span id="history-span" data-value="0">–</span> drawn</div></section>
          <section class="card wide"><h2>Recent failures</h2>
            <table><thead><tr><th>Time</th><th>Client</th><th>Request</th><th class="num">Status</th><th>Cause</th></tr></thead>
            <tbody id="failures-list"></tbody></table><div class="sub" id="failures-none">none since the start</div></section>
          <section class="card wide"><h2>Bytes saved by route</h2>
            <table><thead><tr><th>Route</th><th class="num">Requests</th><th class="num">From cache</th><th class="num">Bytes saved</th></tr></thead>
            <tbody id="routes"></tbody></table></section>
          <section class="card wide"><h2>Top hosts</h2>
            <table><thead><tr><th>Host</th><th class="num">Requests</th><th class="num">From cache</th><th class="num">Bytes</th></tr></thead>
            <tbody id="top-hosts"></tbody></table></section>
        </main>
        <footer class="sub" style="padding:0 1.5rem 1rem">Setting up clients: open the page <code>larder.setup</code> (<code>proxy.setup_host</code>) through the proxy, or run <code>larder client</code>; browsers take <a href="/proxy.pac">/proxy.pac</a>.</footer>
        <script>
        "use strict";
        const outcomes = [["hit","#1a9e5f"],["disk_hit","#3bb37a"],["revalidated","#7fc8a0"],["stale","#c7861a"],
          ["coalesced","#7a5cd6"],["miss","#2f6fde"],["error","#c9364b"],["tunnel","#6b7385"]];
        const classes = [["2xx","#1a9e5f"],["3xx","#2f6fde"],["4xx","#c7861a"],["5xx","#c9364b"]];
        let window_seconds = 900;
        let history = [];
        let previous = null;
        const $ = (id) => document.getElementById(id);
        function bytes(n) {
          const units = ["B","KiB","MiB","GiB","TiB"]; let i = 0;
          while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
          return (i ? n.toFixed(1) : n) + " " + units[i];
        }
        function set(id, value, text) { const el = $(id); el.dataset.value = value; el.textContent = text === undefined ? value.toLocaleString("en") : text; }
        function sum(obj) { return Object.values(obj || {}).reduce((a, b) => a + b, 0); }
        // Requests the proxy answered: the total without the admin listener's, this page's polls among them.
        function proxied(s) { return s.requests.total - (s.requests.admin || 0); }
        function duration(seconds) {
          const d = Math.floor(seconds / 86400), h = Math.floor(seconds % 86400 / 3600), m = Math.floor(seconds % 3600 / 60);
          if (d) return d + " d " + h + " h";
          if (h) return h + " h " + m + " min";
          if (m) return m + " min " + Math.floor(seconds % 60) + " s";
          return Math.floor(seconds) + " s";
        }
        function ago(seconds) {
          if (seconds >= 120) return +(seconds / 60).toFixed(1) + " min ago";
          return +seconds.toFixed(1) + " s ago";
        }
        function millis(seconds) { return seconds == null ? "–" : (seconds * 1000 < 10 ? (seconds * 1000).toFixed(2) : (seconds * 1000).toFixed(0)) + " ms"; }
        function latency(name, q) {
          set("latency-" + name + "-p50", q.p50_seconds ?? "", millis(q.p50_seconds));
          set("latency-" + name + "-p99", q.p99_seconds ?? "", millis(q.p99_seconds));
          set("latency-" + name + "-count", q.count);
        }
        // The daemon's samples as rates between consecutive ones, then one more point from the
        // last sample to now: the window is full from the first poll.
        function fromHistory(s) {
          const h = s.history, points = [];
          if (!h) return points;
          window_seconds = h.interval_seconds * h.capacity;
          const samples = h.samples.concat([{ uptime_seconds: s.uptime_seconds, requests: s.requests }]);
          for (let i = 1; i < samples.length; i++) {
            const a = samples[i - 1], b = samples[i], dt = b.uptime_seconds - a.uptime_seconds;
            if (dt <= 0) continue;
            const point = { t: b.uptime_seconds };
            for (const [name] of outcomes) point[name] = Math.max(0, ((b.requests[name] || 0) - (a.requests[name] || 0)) / dt);
            points.push(point);
          }
          const spans = $("time-axis").children;
          for (let i = 0; i < 4; i++) spans[i].textContent = ago(window_seconds * (4 - i) / 4);
          set("history-samples", h.samples.length);
          set("history-interval", h.interval_seconds, +h.interval_seconds.toFixed(3) + " s");
          const span = h.samples.length ? s.uptime_seconds - h.samples[0].uptime_seconds : 0;
          set("history-span", span, ago(span).replace(" ago", ""));
          return points;
        }
        function escape(text) { return String(text).replace(/[&<>"]/g, c => ({"&":"&amp;","<":"&lt;",">":"&gt;",'"':"&quot;"})[c]); }
        $("legend").innerHTML = outcomes.map(([name, color]) => `<span><i style="background:${color}"></i>${name}</span>`).join("");
        function draw() {
          const canvas = $("chart"), ctx = canvas.getContext("2d"), w = canvas.width, h = canvas.height;
          ctx.clearRect(0, 0, w, h);
          // The time axis: a grid line at each quarter, under the labels of #time-axis; points sit at their time.
          ctx.strokeStyle = "#e3e7ee";
          for (let q = 0; q <= 4; q++) { const x = w * q / 4; ctx.beginPath(); ctx.moveTo(x, 0); ctx.lineTo(x, h); ctx.stroke(); }
          if (history.length < 2) return;
          const now = history[history.length - 1].t;
          const xOf = (p) => w - (now - p.t) / window_seconds * w;
          const max = Math.max(1, ...history.map(p => outcomes.reduce((a, [n]) => a + (p[n] || 0), 0)));
          const base = new Array(history.length).fill(0);
          for (const [name, color] of outcomes) {
            ctx.beginPath();
            history.forEach((p, i) => { const y = h - (base[i] + (p[name] || 0)) / max * (h - 10); i ? ctx.lineTo(xOf(p), y) : ctx.moveTo(xOf(p), y); });
            for (let i = history.length - 1; i >= 0; i--) { ctx.lineTo(xOf(history[i]), h - base[i] / max * (h - 10)); }
            ctx.closePath(); ctx.fillStyle = color; ctx.fill();
            history.forEach((p, i) => { base[i] += p[name] || 0; });
          }
          ctx.fillStyle = "#6b7385"; ctx.font = "12px system-ui"; ctx.fillText(Math.round(max) + " req/s", 6, 14);
        }
        function render(s) {
          $("version").textContent = "v" + s.version;
          set("uptime", s.uptime_seconds, "up " + duration(s.uptime_seconds));
          const badges = [];
          if (!s.disk) badges.push("no disk tier");
          else if (s.disk.degraded) badges.push("disk degraded");
          if (s.health && s.health.status === "unhealthy" && !badges.length) badges.push("unhealthy");
          for (const p of s.parents || []) if (p.down) badges.push("parent " + p.parent + " down");
          if (s.tls && s.tls.spliced_hosts > 0) badges.push("TLS spliced: " + s.tls.spliced_hosts + " host" + (s.tls.spliced_hosts > 1 ? "s" : "") + " (GET /tls)");
          $("badges").innerHTML = badges.map(b => `<span class="badge">${escape(b)}</span>`).join("");
          if (s.health && s.health.problems.length) $("badges").title = s.health.problems.join("; ");
          set("hit-ratio", s.hit_ratio, (s.hit_ratio * 100).toFixed(1) + " %");
          set("requests-total", proxied(s));
          const responses = s.responses || {}, answered = Math.max(1, sum(responses));
          for (const [name] of classes) set("status-" + name, responses[name] || 0);
          $("classes-bar").innerHTML = classes.map(([name, color]) =>
            `<div title="${name}" style="width:${(responses[name] || 0) / answered * 100}%;background:${color}"></div>`).join("");
          set("bytes-cache", s.bytes.from_cache, bytes(s.bytes.from_cache));
          set("bytes-upstream", s.bytes.from_upstream, bytes(s.bytes.from_upstream));
          set("memory-bytes", s.memory.bytes, bytes(s.memory.bytes)); $("memory-max").textContent = bytes(s.memory.max_bytes);
          set("memory-entries", s.memory.entries);
          $("memory-fill").style.width = Math.min(100, s.memory.bytes / s.memory.max_bytes * 100) + "%";
          if (s.disk) {
            set("disk-bytes", s.disk.bytes, bytes(s.disk.bytes)); $("disk-max").textContent = bytes(s.disk.max_bytes);
            set("disk-entries", s.disk.entries);
            $("disk-fill").style.width = Math.min(100, s.disk.bytes / s.disk.max_bytes * 100) + "%";
          }
          set("coalesced", s.coalescing.coalesced); set("fills", s.coalescing.fills);
          set("retries", s.upstream.retries_total); set("failures", sum(s.upstream.failures)); set("stale-if-error", s.upstream.stale_if_error);
          set("connections", s.connections.active); set("accepted", s.connections.accepted);
          if (s.latency) { latency("hit", s.latency.hit); latency("miss", s.latency.miss); }
          const failures = (s.recent_failures || []).slice().reverse();
          $("failures-none").style.display = failures.length ? "none" : "";
          $("failures-list").innerHTML = failures.map(f =>
            `<tr data-cause="${escape(f.cause)}" data-status="${f.status}"><td>${escape(new Date(f.time * 1000).toISOString().slice(11, 19))}</td>` +
            `<td>${escape(f.client || "-")}</td>` +
            `<td>${escape(f.method)} ${escape(f.url)}</td><td class="num">${f.status}</td><td>${escape(f.cause)}</td></tr>`).join("");
          $("routes").innerHTML = (s.routes || []).map(r =>
            `<tr data-route="${escape(r.route)}"><td>${escape(r.route)}</td><td class="num" data-value="${r.requests}">${r.requests.toLocaleString("en")}</td>` +
            `<td class="num">${r.requests ? (r.hits / r.requests * 100).toFixed(0) : 0} %</td>` +
            `<td class="num" data-value="${r.bytes_saved}">${bytes(r.bytes_saved)}</td></tr>`).join("");
          $("top-hosts").innerHTML = s.top_hosts.map(h =>
            `<tr data-host="${escape(h.host)}"><td>${escape(h.host)}</td><td class="num" data-value="${h.requests}">${h.requests.toLocaleString("en")}</td>` +
            `<td class="num">${h.requests ? (h.hits / h.requests * 100).toFixed(0) : 0} %</td><td class="num">${bytes(h.bytes)}</td></tr>`).join("");
          history = fromHistory(s);
          if (previous) {
            const dt = Math.max(0.001, s.uptime_seconds - previous.uptime_seconds);
            const rate = (proxied(s) - proxied(previous)) / dt;
            set("request-rate", rate, rate >= 0 ? rate.toFixed(1) + " /s" : "– /s");
          }
          previous = s; draw();
        }
        async function poll() {
          try {
            const response = await fetch("/stats", { cache: "no-store" });
            render(await response.json());
            $("state").textContent = "live"; $("state").style.color = "#7fe0ad";
          } catch (error) {
            $("state").textContent = "unreachable"; $("state").style.color = "#ff9aa8";
          }
          setTimeout(poll, 1000);
        }
        poll();
        </script>
        </body>
        </html>
        """
}
