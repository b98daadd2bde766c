// kbroker console: helpers every page uses. Data from the cluster is put into the page with textContent only,
// never as markup.
"use strict";
const kb = (() => {
  const token = () => document.querySelector('meta[name="csrf-token"]').content;
  const banner = () => document.getElementById("cluster-status");

  function clusterOk() { const b = banner(); if (b) { b.hidden = true; b.textContent = ""; } }
  function clusterFailed(message) {
    const b = banner();
    if (b) { b.hidden = false; b.textContent = "The cluster is not answering: " + message + " (retrying…)"; }
  }

  async function getJSON(url) {
    const r = await fetch(url, {headers: {"Accept": "application/json"}, credentials: "same-origin"});
    let body = null;
    try { body = await r.json(); } catch (e) { /* not JSON */ }
    if (!r.ok) throw new Error((body && body.error) || (r.status + " " + r.statusText));
    return body;
  }

  async function postJSON(url, data) {
    const r = await fetch(url, {method: "POST", credentials: "same-origin",
      headers: {"Content-Type": "application/json", "Accept": "application/json", "X-CSRF-Token": token()},
      body: JSON.stringify(data || {})});
    let body = null;
    try { body = await r.json(); } catch (e) { /* not JSON */ }
    if (!r.ok) throw new Error((body && body.error) || (r.status + " " + r.statusText));
    return body;
  }

  // Call fn(data) with url's JSON now and every `ms`; a failure shows the banner until a later call succeeds.
  function poll(url, ms, fn) {
    let stopped = false;
    async function once() {
      if (stopped) return;
      try { fn(await getJSON(url)); clusterOk(); }
      catch (e) { clusterFailed(e.message); }
      if (!stopped) setTimeout(once, ms);
    }
    once();
    return () => { stopped = true; };
  }

  // A time-series line chart: datasets [{label, data:[{x: ms, y}]}]; x labels as local clock times.
  function lineChart(canvas, yTitle, datasets) {
    return new Chart(canvas, {
      type: "line",
      data: {datasets: datasets.map((d, i) => Object.assign({borderWidth: 2, pointRadius: 0, cubicInterpolationMode: "monotone",
        fill: false, borderColor: palette[i % palette.length], backgroundColor: palette[i % palette.length]}, d))},
      options: {animation: false, maintainAspectRatio: false, parsing: false, normalized: true,
        interaction: {mode: "nearest", axis: "x", intersect: false},
        scales: {x: {type: "linear", ticks: {maxTicksLimit: 8, callback: (v) => new Date(v).toLocaleTimeString()}},
                 y: {beginAtZero: true, title: {display: !!yTitle, text: yTitle}}},
        plugins: {legend: {display: datasets.length > 1},
          tooltip: {callbacks: {title: (items) => items.length ? new Date(items[0].parsed.x).toLocaleTimeString() : ""}}}}
    });
  }
  // Redraw a lineChart with new datasets' points; the time axis spans at least the last `minSpan` ms.
  function setSeries(chart, pointsPerDataset, minSpan) {
    pointsPerDataset.forEach((points, i) => { if (chart.data.datasets[i]) chart.data.datasets[i].data = points; });
    const xs = pointsPerDataset.flat().map((p) => p.x);
    const now = Date.now(), span = minSpan || 60000;
    const max = Math.max(now, ...xs), min = Math.min(max - span, ...xs);
    chart.options.scales.x.min = min; chart.options.scales.x.max = max;
    chart.update();
  }
  const palette = ["#2f6fde", "#d9480f", "#1d8a4a", "#7048e8", "#c2255c", "#0c8599", "#e67700", "#5c940d"];

  // Forms with data-confirm ask before they submit (CSP forbids inline handlers, so this is the one place).
  document.addEventListener("submit", (ev) => {
    const f = ev.target;
    if (f.dataset && f.dataset.confirm && !window.confirm(f.dataset.confirm)) ev.preventDefault();
  }, true);

  function formatNumber(n, digits) {
    if (n === null || n === undefined) return "–";
    return Number(n).toLocaleString(undefined, {maximumFractionDigits: digits === undefined ? 1 : digits});
  }

  return {getJSON, postJSON, poll, lineChart, setSeries, formatNumber, clusterOk, clusterFailed, palette};
})();
