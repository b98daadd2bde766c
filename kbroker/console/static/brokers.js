// The Brokers page's charts: the console scrapes the brokers' Prometheus endpoints at each poll of metrics.json.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const grid = document.querySelector(".chart-grid");
  const select = document.getElementById("latency-request");
  const status = document.getElementById("metrics-status");
  const charts = {
    bytesin: kb.lineChart(document.getElementById("chart-bytesin"), "bytes/s", []),
    bytesout: kb.lineChart(document.getElementById("chart-bytesout"), "bytes/s", []),
    requests: kb.lineChart(document.getElementById("chart-requests"), "requests/s", []),
    p99: kb.lineChart(document.getElementById("chart-p99"), "ms", []),
  };
  // Counts per second: whole-number ticks (an idle broker's chart reads 0 to 1, not 0.1 steps).
  for (const name of ["bytesin", "bytesout", "requests"]) charts[name].options.scales.y.ticks.precision = 0;

  function draw(chart, datasets) {
    datasets.forEach((ds, i) => {
      const color = kb.palette[i % kb.palette.length];
      if (!chart.data.datasets[i]) {
        chart.data.datasets.push({label: ds.label, data: [], borderWidth: 2, pointRadius: 2, cubicInterpolationMode: "monotone",
          fill: false, borderColor: color, backgroundColor: color});
      }
      chart.data.datasets[i].label = ds.label;
    });
    chart.data.datasets.length = datasets.length;
    chart.options.plugins.legend.display = datasets.length > 0;
    kb.setSeries(chart, datasets.map((ds) => ds.points.map((p) => ({x: p.t, y: p.y}))), 60000);
  }

  function addRequestTypes(names) {
    const have = new Set(Array.from(select.options, (o) => o.value));
    names.filter((n) => !have.has(n)).forEach((n) => {
      const o = document.createElement("option");
      o.value = n; o.textContent = n;
      select.appendChild(o);
    });
    Array.from(select.options).sort((a, b) => a.value.localeCompare(b.value))
      .forEach((o) => select.appendChild(o));
  }

  function show(d) {
    const broken = d.endpoints.filter((e) => e.error);
    if (!d.endpoints.length) {
      status.hidden = false;
      status.textContent = "No metrics endpoint: the brokers do not set metrics.port and the console was started " +
        "without --metrics-url, so there is no traffic to chart. The rest of the page is unaffected.";
    } else if (broken.length) {
      status.hidden = false;
      status.textContent = (d.reachable ? "Some metrics endpoints are not answering: " :
        "No metrics endpoint is reachable, the charts cannot be drawn: ") +
        broken.map((e) => e.label + (e.url ? " (" + e.url + ")" : "") + ": " + e.error).join("; ");
    } else {
      status.hidden = true;
      status.textContent = "";
    }
    document.getElementById("metrics-sources").textContent = d.endpoints.length ?
      "(from " + d.endpoints.filter((e) => e.url).map((e) => e.label + " " + e.url).join(", ") + ")" : "";
    addRequestTypes(d.requests);
    for (const name of Object.keys(charts)) draw(charts[name], d.charts[name]);
  }

  let stop = null;
  function start() {
    if (stop) stop();
    stop = kb.poll(grid.dataset.source + "?request=" + encodeURIComponent(select.value), 5000, show);
  }
  select.addEventListener("change", start);
  start();
});
