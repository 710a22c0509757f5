// topk live leaderboard: polls the JSON API (/v1/top, /v1/top/global,
// /v1/series) of the server that serves this file and renders the rankings
// with a sparkline and a rank movement per row, the busiest workspaces to
// pick from, and the rising view (by=growth). Plain JavaScript, no libraries.
//
// URL parameters: workspace=W (also set from the input and the busiest
// list), window=1h|24h|7d|30d|all, mode=top|rising (default top), k=rows
// per ranking and workspaces listed (1..50, default 10), refresh=seconds
// between polls (0.2..3600, decimals allowed, default 5).
//
// API token: a server with API tokens answers the page's fetches only with
// a token of scope read. The page takes it from the URL fragment
// (#token=T: browsers never send the fragment to the server, so it is in
// no request line or log), removes it from the address bar, keeps it in
// this tab's sessionStorage and sends it as "Authorization: Bearer T" on
// every fetch. Without one, or when the server refuses it (401, 403), the
// page stops polling and asks for one.
"use strict";

(function () {
  var WINDOWS = ["1h", "24h", "7d", "30d", "all"];
  var MODES = ["top", "rising"];
  var MAX_SERIES = 50; // the server's bound on ids per /v1/series request
  // BUSIEST_K is how much of the global ranking the busiest-workspaces list
  // sums (the API's largest k): there is no per-workspace total route, so
  // the list is honest only about the channels of this global top.
  var BUSIEST_K = 1000;
  var SVG = "http://www.w3.org/2000/svg";

  var params = new URLSearchParams(location.search);
  var state = {
    window: WINDOWS.indexOf(params.get("window")) >= 0 ? params.get("window") : "1h",
    workspace: (params.get("workspace") || "").trim(),
    mode: MODES.indexOf(params.get("mode")) >= 0 ? params.get("mode") : "top",
    k: intParam(params.get("k"), 1, MAX_SERIES, 10),
    refresh: numParam(params.get("refresh"), 0.2, 3600, 5),
  };

  var panels = {
    global: panel(document.getElementById("global-panel")),
    workspace: panel(document.getElementById("workspace-panel")),
  };
  var busiest = {
    hint: document.querySelector("#busiest-panel .hint"),
    status: document.querySelector("#busiest-panel .status"),
    picks: document.querySelector("#busiest-panel .picks"),
  };
  var form = document.getElementById("controls");
  var windows = document.getElementById("windows");
  var input = document.getElementById("workspace");
  var timer = 0;
  var generation = 0; // bumped on every refresh: late answers of older ones are dropped
  var TOKEN_KEY = "topk.token";
  var token = takeToken();
  var needToken = false; // the server refused the fetches for want of a token: polling waits for one
  var tokenForm = document.getElementById("token-form");
  var tokenInput = document.getElementById("token");

  function intParam(v, lo, hi, def) {
    var n = parseInt(v, 10);
    return isNaN(n) ? def : Math.min(hi, Math.max(lo, n));
  }

  function numParam(v, lo, hi, def) {
    var n = parseFloat(v);
    return isNaN(n) ? def : Math.min(hi, Math.max(lo, n));
  }

  function panel(el) {
    return {
      el: el,
      title: el.querySelector(".title"),
      age: el.querySelector(".age"),
      status: el.querySelector(".status"),
      note: el.querySelector(".note"),
      rows: el.querySelector(".rows"),
      total: el.querySelector(".total"),
      result: null, // the last ranking shown
      fetchedAt: 0, // when it was received (ms, local clock)
      view: "", // the view (viewKey) whose ranks are kept below
      ranks: null, // id -> rank at the previous poll of that view
    };
  }

  // --- API token -------------------------------------------------------------

  // takeToken reads the token from the URL fragment (then removed from the
  // address bar and kept in sessionStorage), else from sessionStorage.
  function takeToken() {
    var frag = new URLSearchParams(location.hash.replace(/^#/, ""));
    var t = (frag.get("token") || "").trim();
    if (t) {
      storeToken(t);
      frag.delete("token");
      var rest = frag.toString();
      history.replaceState(null, "", location.pathname + location.search + (rest ? "#" + rest : ""));
      return t;
    }
    try {
      return sessionStorage.getItem(TOKEN_KEY) || "";
    } catch (e) {
      return ""; // storage disabled: the token lives in this page only
    }
  }

  function storeToken(t) {
    try {
      if (t) sessionStorage.setItem(TOKEN_KEY, t);
      else sessionStorage.removeItem(TOKEN_KEY);
    } catch (e) {
      /* storage disabled */
    }
  }

  function askToken(refused) {
    needToken = true;
    tokenForm.querySelector("label").textContent = refused
      ? "The server refused this page's API token: give a token of scope read."
      : "This server needs an API token of scope read.";
    tokenForm.hidden = false;
  }

  // --- API -----------------------------------------------------------------

  function getJSON(url) {
    var headers = { Accept: "application/json" };
    if (token) headers.Authorization = "Bearer " + token;
    return fetch(url, { cache: "no-store", headers: headers }).then(
      function (resp) {
        return resp.text().then(function (text) {
          var body = null;
          try {
            body = JSON.parse(text);
          } catch (e) {
            /* not JSON: reported below */
          }
          if (!resp.ok) {
            var err = new Error((body && body.error) || "HTTP " + resp.status);
            err.status = resp.status;
            throw err;
          }
          if (body === null) throw new Error("the server answered something other than JSON");
          return body;
        });
      },
      function () {
        var err = new Error("cannot reach the server");
        err.status = 0;
        throw err;
      }
    );
  }

  // rankingURL is the ranking a panel shows: by growth over the hour in
  // the rising mode (the API has it for 1h only), else by events over the
  // chosen window.
  function rankingURL(which) {
    var q = new URLSearchParams({ k: String(state.k) });
    if (state.mode === "rising") q.set("by", "growth");
    else q.set("window", state.window);
    if (which === "workspace") {
      q.set("workspace", state.workspace);
      return "/v1/top?" + q;
    }
    return "/v1/top/global?" + q;
  }

  // busiestWindow is the window the busiest-workspaces list sums: the one
  // shown, or the hour that the rising view compares.
  function busiestWindow() {
    return state.mode === "rising" ? "1h" : state.window;
  }

  function busiestURL() {
    return "/v1/top/global?" + new URLSearchParams({ window: busiestWindow(), k: String(BUSIEST_K) });
  }

  function seriesURL(which, ids) {
    var q = new URLSearchParams();
    if (which === "workspace") q.set("workspace", state.workspace);
    var plain = ids.filter(function (id) { return id.indexOf(",") < 0; });
    if (plain.length) q.set("ids", plain.join(","));
    ids.forEach(function (id) {
      if (id.indexOf(",") >= 0) q.append("id", id); // an id with a comma goes alone
    });
    return "/v1/series?" + q;
  }

  // --- refresh loop ----------------------------------------------------------

  // refresh polls every view once. In the top mode the global panel shows
  // the first k items of the ranking the busiest list sums, so that is
  // one request, not two.
  function refresh() {
    clearTimeout(timer);
    var gen = ++generation;
    var top = getJSON(busiestURL());
    var global = state.mode === "top" ? top.then(firstK) : getJSON(rankingURL("global"));
    var jobs = [loadBusiest(top, gen), load("global", gen, global)];
    if (state.workspace) jobs.push(load("workspace", gen, getJSON(rankingURL("workspace"))));
    Promise.all(jobs).then(function () {
      if (gen === generation && !needToken) timer = setTimeout(refresh, state.refresh * 1000);
    });
  }

  // firstK is res cut to the rows a panel shows.
  function firstK(res) {
    var items = (res.items || []).slice(0, state.k);
    return Object.assign({}, res, {
      items: items,
      exact: items.every(function (it) { return it.error === 0; }),
    });
  }

  // load waits for one ranking, fetches its rows' series, and renders
  // them. It never rejects: failures are shown in the panel.
  function load(which, gen, ranking) {
    var p = panels[which];
    return ranking
      .then(function (res) {
        var items = (res.items || []).slice(0, MAX_SERIES);
        if (!items.length) return [res, null];
        var ids = items.map(function (it) { return it.id; });
        return getJSON(seriesURL(which, ids)).then(
          function (s) { return [res, s]; },
          function () { return [res, null]; } // the ranking is still worth showing
        );
      })
      .then(
        function (pair) {
          if (gen !== generation) return;
          render(p, which, pair[0], pair[1]);
        },
        function (err) {
          if (gen !== generation) return;
          showError(p, which, err);
        }
      );
  }

  // --- rendering ---------------------------------------------------------

  function render(p, which, res, series) {
    var before = trackRanks(p, which, res.items);
    p.result = res;
    p.fetchedAt = Date.now();
    p.el.classList.remove("failed");
    p.status.textContent = res.items.length ? "" : emptyText(res);
    p.note.textContent = noteText(res);
    var counts = {};
    if (series && series.series) {
      series.series.forEach(function (s) { counts[s.id] = s.counts; });
    }
    var frag = document.createDocumentFragment();
    res.items.forEach(function (it) {
      frag.appendChild(row(which, it, counts[it.id], res.window, movement(before, it)));
    });
    p.rows.replaceChildren(frag);
    p.total.textContent = totalText(res);
    p.el.classList.toggle("approx", !res.exact);
    showAge(p);
  }

  // viewKey names what a panel shows: rank movement compares polls of the
  // same view only.
  function viewKey(which) {
    return [which, which === "workspace" ? state.workspace : "", state.mode, state.mode === "rising" ? "1h" : state.window].join("\n");
  }

  // trackRanks keeps the ranks of items for the next poll and returns
  // those of the previous poll of the same view (null when there was none:
  // the first poll, or the view changed).
  function trackRanks(p, which, items) {
    var key = viewKey(which);
    var before = p.view === key ? p.ranks : null;
    p.view = key;
    p.ranks = {};
    items.forEach(function (it) { p.ranks[it.id] = it.rank; });
    return before;
  }

  function forgetRanks(p) {
    p.view = "";
    p.ranks = null;
  }

  // movement is an item's rank change since the previous poll: a class,
  // the symbol shown, and the words for screen readers and tooltips (the
  // colour is never the only sign).
  function movement(before, it) {
    if (!before) return null;
    var was = before[it.id];
    if (was === undefined) return { cls: "new", shown: "new", words: "new" };
    var d = was - it.rank;
    if (d > 0) return { cls: "up", shown: "▲" + d, words: "up " + d };
    if (d < 0) return { cls: "down", shown: "▼" + -d, words: "down " + -d };
    return { cls: "same", shown: "–", words: "unchanged" };
  }

  function emptyText(res) {
    if (res.by === "growth") {
      return "No channel grew: none with at least " + (res.min_count || 1).toLocaleString("en-US") +
        " events in the last hour had more than in the hour before.";
    }
    return "No activity in the " + res.window + " window.";
  }

  // noteText is what a rising answer says about its own precision.
  function noteText(res) {
    if (res.by !== "growth") return "";
    var s = "Last hour vs the hour before; channels with at least " + (res.min_count || 1).toLocaleString("en-US") + " events.";
    if (!res.exact && res.bound > 0) s += " Not exact: a channel not listed may have grown by up to " + res.bound.toLocaleString("en-US") + ".";
    else if (!res.exact) s += " Approximate: each growth is within its ± bound.";
    return s;
  }

  // totalText sums the listed counts. The API gives no total of the whole
  // window (GET /v1/top/global carries no event count), so it is the
  // listed rows' sum and says so; the error bounds add up too.
  function totalText(res) {
    var items = res.items;
    if (!items.length) return "";
    var sum = function (f) { return items.reduce(function (a, it) { return a + f(it); }, 0); };
    var count = sum(function (it) { return it.count; });
    var err = sum(function (it) { return Math.max(it.error, 0); });
    var unknown = items.some(function (it) { return it.error < 0; });
    var bound = unknown ? " ≈" : err > 0 ? " ±" + err.toLocaleString("en-US") : "";
    var head = "Sum of the " + items.length + " listed: ";
    if (res.by === "growth") {
      return head + signed(sum(function (it) { return it.growth; })) + bound + " growth; " +
        count.toLocaleString("en-US") + " events in the last hour, " +
        sum(function (it) { return it.previous; }).toLocaleString("en-US") + " the hour before.";
    }
    return head + count.toLocaleString("en-US") + bound + " events in the " + res.window + " window.";
  }

  function signed(n) {
    return (n > 0 ? "+" : "") + n.toLocaleString("en-US");
  }

  function showError(p, which, err) {
    p.el.classList.add("failed");
    var msg = err.message;
    if (err.status === 503) msg = "Redis cannot be read: the ranking below may be old. (" + err.message + ")";
    if (err.status === 0) msg = "Cannot reach the server: the ranking below may be old.";
    if (err.status === 401 || err.status === 403) {
      askToken(!!token);
      msg = "Not allowed to read: " + err.message;
    }
    if (err.status === 404) {
      clearPanel(p);
      msg = which === "workspace" ? "No ranking for this workspace yet: " + err.message : err.message;
    }
    p.status.textContent = msg;
    showAge(p);
  }

  // clearPanel empties a panel, whose next ranking starts a new view.
  function clearPanel(p) {
    p.result = null;
    p.rows.replaceChildren();
    p.note.textContent = "";
    p.total.textContent = "";
    forgetRanks(p);
  }

  function row(which, it, counts, win, move) {
    var li = el("li", "row");
    li.dataset.id = it.id;
    li.dataset.move = move ? move.words : "";
    li.appendChild(el("span", "rank", String(it.rank)));
    li.appendChild(moveNode(move));

    var name = el("span", "name");
    name.title = showBidi(it.id);
    if (which === "global") {
      var parts = splitGlobal(it.id);
      name.appendChild(idNode("wsname", parts[0]));
      name.appendChild(el("span", "wsname", "/"));
      name.appendChild(el("wbr")); // a long id wraps after the "/" first
      name.appendChild(idNode("ch", parts[1]));
    } else {
      name.appendChild(idNode("ch", it.id));
    }
    li.appendChild(name);
    li.appendChild(sparkline(counts));

    if (it.growth !== undefined) {
      li.classList.add("rising");
      li.appendChild(growthNode(it));
      var was = el("span", "was", it.count.toLocaleString("en-US") + " in the last hour, " +
        it.previous.toLocaleString("en-US") + " the hour before");
      li.appendChild(was);
      return li;
    }
    var count = el("span", "count", formatCount(it.count));
    count.title = it.count.toLocaleString("en-US") + " events in the " + win + " window";
    appendError(count, it);
    li.appendChild(count);
    return li;
  }

  // moveNode shows a movement as a symbol for the eye and words for a
  // screen reader (the symbol is hidden from it).
  function moveNode(move) {
    var span = el("span", "move" + (move ? " " + move.cls : ""));
    if (!move) return span;
    span.title = move.words + " since the previous refresh";
    var shown = el("span", "", move.shown);
    shown.setAttribute("aria-hidden", "true");
    span.appendChild(shown);
    span.appendChild(el("span", "sr", move.words));
    return span;
  }

  function growthNode(it) {
    var g = el("span", "growth", signed(it.growth));
    g.title = "grew by " + it.growth.toLocaleString("en-US") + ": " + it.count.toLocaleString("en-US") +
      " events in the last hour, " + it.previous.toLocaleString("en-US") + " in the hour before";
    appendError(g, it);
    return g;
  }

  // appendError adds an item's error bound to the cell showing its value.
  function appendError(cell, it) {
    if (it.error > 0) {
      cell.appendChild(el("small", "err", "±" + formatCount(it.error)));
      cell.title += ", true value within ±" + it.error.toLocaleString("en-US");
    } else if (it.error < 0) {
      cell.appendChild(el("small", "err", "≈"));
      cell.title += ", error bound unknown";
    }
  }

  // --- busiest workspaces ------------------------------------------------

  // loadBusiest sums the global ranking res by workspace and lists the
  // busiest. It never rejects.
  function loadBusiest(ranking, gen) {
    return ranking.then(
      function (res) {
        if (gen !== generation) return;
        renderBusiest(res);
      },
      function (err) {
        if (gen !== generation) return;
        busiest.status.textContent = err.status === 404 ? err.message : "Cannot list the busiest workspaces: " + err.message;
      }
    );
  }

  // sumByWorkspace is each workspace's summed count over the items of a
  // global ranking, busiest first (ties by name, for a stable order).
  function sumByWorkspace(items) {
    var sums = {};
    items.forEach(function (it) {
      var ws = splitGlobal(it.id)[0];
      sums[ws] = (sums[ws] || 0) + it.count;
    });
    return Object.keys(sums)
      .map(function (ws) { return { ws: ws, count: sums[ws] }; })
      .sort(function (a, b) { return b.count - a.count || (a.ws < b.ws ? -1 : a.ws > b.ws ? 1 : 0); });
  }

  function renderBusiest(res) {
    var items = res.items || [];
    busiest.hint.textContent = "Summed over their channels in the global top " + BUSIEST_K +
      " · " + res.window + " (" + items.length.toLocaleString("en-US") + " channels listed)";
    busiest.status.textContent = items.length ? "" : "No activity in the " + res.window + " window.";
    // Rebuilding the buttons would drop the keyboard focus: it moves to
    // the new button of the same workspace.
    var focused = busiest.picks.contains(document.activeElement) ? document.activeElement.dataset.ws : null;
    var frag = document.createDocumentFragment();
    var refocus = null;
    sumByWorkspace(items).slice(0, state.k).forEach(function (w) {
      var li = el("li");
      var b = el("button", "pick");
      b.type = "button";
      b.dataset.ws = w.ws;
      b.title = showBidi(w.ws) + ": " + w.count.toLocaleString("en-US") + " events in its channels of the global top " + BUSIEST_K;
      b.appendChild(idNode("wsid", w.ws));
      b.appendChild(el("span", "sum", formatCount(w.count)));
      if (w.ws === state.workspace) b.setAttribute("aria-current", "true");
      b.addEventListener("click", function () { showWorkspace(w.ws); });
      if (w.ws === focused) refocus = b;
      li.appendChild(b);
      frag.appendChild(li);
    });
    busiest.picks.replaceChildren(frag);
    if (refocus) refocus.focus({ preventScroll: true });
  }

  // markCurrent marks the listed workspace that is shown.
  function markCurrent() {
    busiest.picks.querySelectorAll("button.pick").forEach(function (b) {
      if (b.dataset.ws === state.workspace) b.setAttribute("aria-current", "true");
      else b.removeAttribute("aria-current");
    });
  }

  // splitGlobal splits a global item id, "<workspace>/<channel>", into
  // its two parts, decoded. The server (keys.GlobalItem) escapes '%' and
  // the control bytes in both parts and '/' in the workspace, as %XX with
  // upper-case hex, so the first '/' is the separator.
  function splitGlobal(id) {
    var cut = id.indexOf("/");
    if (cut < 0) return [id, ""];
    return [decodePart(id.slice(0, cut)), decodePart(id.slice(cut + 1))];
  }

  // BIDI matches the bidirectional formatting characters: the embeddings
  // and overrides U+202A..U+202E, the isolates U+2066..U+2069 and the marks
  // U+200E, U+200F and U+061C. Ids are any UTF-8, so one may hold them, and
  // applied they would make it display as another id ("\u202Elareneg" as
  // "general") or reorder the text around it. The page shows them instead,
  // as marks like <U+202E>.
  var BIDI = /[\u202A-\u202E\u2066-\u2069\u200E\u200F\u061C]/g;

  function bidiMark(c) {
    return "<U+" + ("000" + c.charCodeAt(0).toString(16).toUpperCase()).slice(-4) + ">";
  }

  // showBidi is s with its bidirectional formatting characters as marks,
  // for plain text (a tooltip).
  function showBidi(s) {
    return s.replace(BIDI, bidiMark);
  }

  // readBidi undoes showBidi: each mark of a bidirectional formatting
  // character is that character again.
  function readBidi(s) {
    return s.replace(/<U\+(202[A-E]|206[6-9]|200[EF]|061C)>/gi, function (_, hex) {
      return String.fromCharCode(parseInt(hex, 16));
    });
  }

  // idNode is an id as the page shows it: in a <bdi>, so that a
  // right-to-left id reads as it should without moving the rank, the
  // count or the "/" beside it, and with its bidirectional formatting
  // characters shown as marks (class "ctl") rather than applied.
  function idNode(cls, s) {
    var b = el("bdi", cls);
    var last = 0;
    s.replace(BIDI, function (c, at) {
      if (at > last) b.appendChild(document.createTextNode(s.slice(last, at)));
      b.appendChild(el("span", "ctl", bidiMark(c)));
      last = at + c.length;
      return c;
    });
    if (last < s.length) b.appendChild(document.createTextNode(s.slice(last)));
    return b;
  }

  // decodePart undoes the %XX escapes of a global item id's part. Only
  // ASCII bytes are escaped, so each %XX is one character; a '%' not
  // followed by two hex digits (never written by the server) stays.
  function decodePart(s) {
    return s.replace(/%([0-9A-F]{2})/g, function (_, hex) {
      return String.fromCharCode(parseInt(hex, 16));
    });
  }

  // sparkline draws the full minutes of a series (the API's last minute
  // is still filling, and its bucket is written as it ends: drawn, it
  // would always drop to 0).
  function sparkline(series) {
    var counts = series && series.length > 1 ? series.slice(0, -1) : series;
    var w = 60, h = 20;
    var svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("class", "spark");
    svg.setAttribute("viewBox", "0 0 " + w + " " + h);
    svg.setAttribute("preserveAspectRatio", "none");
    svg.setAttribute("aria-hidden", "true");
    if (!counts || !counts.length) {
      svg.classList.add("nodata");
      return svg;
    }
    var max = Math.max.apply(null, counts);
    var total = counts.reduce(function (a, b) { return a + b; }, 0);
    var step = counts.length > 1 ? w / (counts.length - 1) : w;
    var pts = counts.map(function (c, i) {
      var y = max > 0 ? h - 1 - (c / max) * (h - 3) : h - 1;
      return (i * step).toFixed(2) + "," + y.toFixed(2);
    });
    var area = document.createElementNS(SVG, "polygon");
    area.setAttribute("class", "area");
    area.setAttribute("points", "0," + h + " " + pts.join(" ") + " " + w + "," + h);
    var line = document.createElementNS(SVG, "polyline");
    line.setAttribute("class", "line");
    line.setAttribute("points", pts.join(" "));
    line.setAttribute("vector-effect", "non-scaling-stroke");
    var title = document.createElementNS(SVG, "title");
    title.textContent = total.toLocaleString("en-US") + " events in the last " + counts.length +
      " full min, peak " + max.toLocaleString("en-US") + "/min, last full minute " +
      counts[counts.length - 1].toLocaleString("en-US");
    svg.appendChild(title);
    svg.appendChild(area);
    svg.appendChild(line);
    return svg;
  }

  function formatCount(n) {
    if (Math.abs(n) < 100000) return n.toLocaleString("en-US");
    if (Math.abs(n) < 1e9) return (n / 1e6).toFixed(n < 1e7 ? 2 : 1).replace(/\.?0+$/, "") + "M";
    return (n / 1e9).toFixed(1).replace(/\.0$/, "") + "G";
  }

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // showAge writes how old the shown ranking is: the server's age_seconds
  // when it answered, plus the time since.
  function showAge(p) {
    var res = p.result;
    if (!res) {
      p.age.textContent = "";
      p.age.className = "age";
      return;
    }
    var age = res.age_seconds + (Date.now() - p.fetchedAt) / 1000;
    p.age.textContent = (res.stale ? "stale · " : "") + formatAge(age) + " old";
    p.age.className = "age" + (res.stale ? " stale" : "");
    p.age.title = "computed at " + res.computed_at + (res.stale
      ? "; stale: the scheduler has not refreshed it for over twice its period (is topk schedule running?)"
      : "");
  }

  function formatAge(s) {
    if (s < 10) return s.toFixed(1) + " s";
    if (s < 90) return Math.round(s) + " s";
    if (s < 5400) return Math.round(s / 60) + " min";
    if (s < 172800) return Math.round(s / 3600) + " h";
    return Math.round(s / 86400) + " d";
  }

  // --- controls ------------------------------------------------------------

  // apply shows the state in the titles, the controls and the URL.
  function apply() {
    var ws = panels.workspace;
    var rising = state.mode === "rising";
    var what = rising ? " · rising, 1h" : " · " + state.window;
    ws.el.hidden = !state.workspace;
    ws.title.replaceChildren("Workspace ", idNode("wsid", state.workspace), what);
    panels.global.title.textContent = "Global" + what;
    if (!state.workspace) clearPanel(ws);
    // Rising compares the last hour with the hour before: the window
    // selector does not apply, so it is hidden (and out of the Tab order)
    // rather than showing a window the view does not use.
    windows.hidden = rising;
    document.getElementById("mode-note").hidden = !rising;
    markCurrent();
    var q = new URLSearchParams(location.search);
    if (state.workspace) q.set("workspace", state.workspace);
    else q.delete("workspace");
    q.set("window", state.window);
    if (rising) q.set("mode", "rising");
    else q.delete("mode");
    history.replaceState(null, "", location.pathname + "?" + q);
    document.getElementById("refresh-note").textContent = "Refreshes every " + state.refresh + " s.";
  }

  // showWorkspace switches the workspace panel to ws (from the field or
  // the busiest list).
  function showWorkspace(ws) {
    input.value = showBidi(ws);
    if (ws !== state.workspace) {
      state.workspace = ws;
      clearPanel(panels.workspace);
      panels.workspace.status.textContent = ws ? "Loading…" : "";
    }
    apply();
    refresh();
  }

  // The field shows the workspace's bidirectional formatting characters
  // as marks too (an input cannot hold a <bdi>), and reads marks back as
  // the characters, so such a workspace can be shown and typed.
  input.value = showBidi(state.workspace);
  form.elements.namedItem("window").value = state.window;
  form.elements.namedItem("mode").value = state.mode;
  form.addEventListener("submit", function (e) {
    e.preventDefault();
    showWorkspace(readBidi(input.value.trim()));
  });
  form.addEventListener("change", function (e) {
    if (e.target.name === "window") state.window = e.target.value;
    else if (e.target.name === "mode") state.mode = e.target.value;
    else return;
    apply();
    refresh();
  });
  tokenForm.addEventListener("submit", function (e) {
    e.preventDefault();
    token = tokenInput.value.trim();
    tokenInput.value = "";
    storeToken(token);
    needToken = false;
    tokenForm.hidden = true;
    refresh();
  });
  setInterval(function () {
    showAge(panels.global);
    showAge(panels.workspace);
  }, 1000);

  apply();
  refresh();
})();
