// topk live leaderboard: polls the JSON API (/v1/top, /v1/top/global,
// /v1/series) of the server that serves this file and renders the rankings
// with a sparkline per row. Plain JavaScript, no libraries.
//
// URL parameters: workspace=W (also set from the input), window=1h|24h|7d|30d|all,
// k=rows per ranking (1..50, default 10), refresh=seconds (default 5).
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
  var MAX_SERIES = 50; // the server's bound on ids per /v1/series request
  var SVG = "http://www.w3.org/2000/svg";

  var params = new URLSearchParams(location.search);
  var state = {
    window: WINDOWS.indexOf(params.get("window")) >= 0 ? params.get("window") : "1h",
    workspace: (params.get("workspace") || "").trim(),
    k: intParam(params.get("k"), 1, MAX_SERIES, 10),
    refresh: intParam(params.get("refresh"), 1, 3600, 5),
  };

  var panels = {
    global: panel(document.getElementById("global-panel")),
    workspace: panel(document.getElementById("workspace-panel")),
  };
  var form = document.getElementById("controls");
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

  function panel(el) {
    return {
      el: el,
      title: el.querySelector(".title"),
      age: el.querySelector(".age"),
      status: el.querySelector(".status"),
      rows: el.querySelector(".rows"),
      result: null, // the last ranking shown
      fetchedAt: 0, // when it was received (ms, local clock)
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

  function rankingURL(which) {
    var q = new URLSearchParams({ window: state.window, k: String(state.k) });
    if (which === "workspace") {
      q.set("workspace", state.workspace);
      return "/v1/top?" + q;
    }
    return "/v1/top/global?" + q;
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

  function refresh() {
    clearTimeout(timer);
    var gen = ++generation;
    var jobs = [load("global", gen)];
    if (state.workspace) jobs.push(load("workspace", gen));
    Promise.all(jobs).then(function () {
      if (gen === generation && !needToken) timer = setTimeout(refresh, state.refresh * 1000);
    });
  }

  // load fetches one ranking, then its rows' series, and renders them.
  // It never rejects: failures are shown in the panel.
  function load(which, gen) {
    var p = panels[which];
    return getJSON(rankingURL(which))
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
    p.result = res;
    p.fetchedAt = Date.now();
    p.el.classList.remove("failed");
    p.status.textContent = res.items.length ? "" : "No activity in the " + res.window + " window.";
    var counts = {};
    if (series && series.series) {
      series.series.forEach(function (s) { counts[s.id] = s.counts; });
    }
    var frag = document.createDocumentFragment();
    res.items.forEach(function (it) {
      frag.appendChild(row(which, it, counts[it.id], res.window));
    });
    p.rows.replaceChildren(frag);
    p.el.classList.toggle("approx", !res.exact);
    showAge(p);
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
      p.result = null;
      p.rows.replaceChildren();
      msg = which === "workspace" ? "No ranking for this workspace yet: " + err.message : err.message;
    }
    p.status.textContent = msg;
    showAge(p);
  }

  function row(which, it, counts, win) {
    var li = el("li", "row");
    li.dataset.id = it.id;
    li.appendChild(el("span", "rank", String(it.rank)));

    var name = el("span", "name");
    name.title = showBidi(it.id);
    if (which === "global") {
      var cut = it.id.indexOf("/");
      name.appendChild(idNode("wsname", decodePart(it.id.slice(0, cut))));
      name.appendChild(el("span", "wsname", "/"));
      name.appendChild(idNode("ch", decodePart(it.id.slice(cut + 1))));
    } else {
      name.appendChild(idNode("ch", it.id));
    }
    li.appendChild(name);
    li.appendChild(sparkline(counts));

    var count = el("span", "count", formatCount(it.count));
    count.title = it.count.toLocaleString("en-US") + " events in the " + win + " window";
    if (it.error > 0) {
      count.appendChild(el("small", "err", "±" + formatCount(it.error)));
      count.title += ", true count within ±" + it.error.toLocaleString("en-US");
    } else if (it.error < 0) {
      count.appendChild(el("small", "err", "≈"));
      count.title += ", error bound unknown";
    }
    li.appendChild(count);
    return li;
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

  // decodePart undoes the %XX escapes of a global item id's part.
  function decodePart(s) {
    try {
      return decodeURIComponent(s);
    } catch (e) {
      return s;
    }
  }

  function sparkline(counts) {
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
      " min, peak " + max.toLocaleString("en-US") + "/min, this minute " +
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

  function apply() {
    var ws = panels.workspace;
    ws.el.hidden = !state.workspace;
    ws.title.replaceChildren("Workspace ", idNode("wsid", state.workspace), " · " + state.window);
    panels.global.title.textContent = "Global · " + state.window;
    if (!state.workspace) {
      ws.result = null;
      ws.rows.replaceChildren();
    }
    var q = new URLSearchParams(location.search);
    if (state.workspace) q.set("workspace", state.workspace);
    else q.delete("workspace");
    q.set("window", state.window);
    history.replaceState(null, "", location.pathname + "?" + q);
    document.getElementById("refresh-note").textContent = "Refreshes every " + state.refresh + " s.";
  }

  // The field shows the workspace's bidirectional formatting characters
  // as marks too (an input cannot hold a <bdi>), and reads marks back as
  // the characters, so such a workspace can be shown and typed.
  input.value = showBidi(state.workspace);
  form.elements.namedItem("window").value = state.window;
  form.addEventListener("submit", function (e) {
    e.preventDefault();
    var ws = readBidi(input.value.trim());
    input.value = showBidi(ws);
    if (ws !== state.workspace) {
      state.workspace = ws;
      panels.workspace.rows.replaceChildren();
      panels.workspace.result = null;
      panels.workspace.status.textContent = ws ? "Loading…" : "";
    }
    apply();
    refresh();
  });
  form.addEventListener("change", function (e) {
    if (e.target.name !== "window") return;
    state.window = e.target.value;
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
