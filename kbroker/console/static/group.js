// A consumer group's page: its lag over time (total and per topic), sampled by the console at each poll.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const canvas = document.getElementById("lag-chart");
  const chart = kb.lineChart(canvas, "messages behind", [{label: "total lag", data: [], pointRadius: 2}]);
  chart.options.plugins.legend.display = true;
  const text = (id, value) => { const el = document.getElementById(id); if (el) el.textContent = value; };
  // The reset form asks for a value only where it needs one: an offset, or a time.
  const kind = document.getElementById("reset-kind");
  const valueLabel = document.getElementById("reset-value-label");
  const valueInput = document.getElementById("reset-value");
  function showValue() {
    const needs = {offset: ["Offset", "e.g. 1000"],
                   timestamp: ["Time", "2024-05-01T12:00:00.000 (UTC), +02:00, or epoch ms"]}[kind.value];
    valueLabel.style.display = needs ? "" : "none";
    if (needs) {
      document.getElementById("reset-value-name").textContent = needs[0];
      valueInput.placeholder = needs[1];
    }
  }
  kind.addEventListener("change", showValue);
  showValue();

  kb.poll(canvas.dataset.source, 3000, (d) => {
    text("group-state", d.state);
    text("group-members", String(d.members));
    text("lag-now", kb.formatNumber(d.lag, 0));
    // The partitions table follows too (a partition that appeared since the page loaded shows on a reload).
    const rows = new Map(Array.from(document.querySelectorAll("#offsets tbody tr"),
      (tr) => [tr.dataset.topic + "\u0000" + tr.dataset.partition, tr]));
    d.partitions.forEach((p) => {
      const tr = rows.get(p.topic + "\u0000" + p.partition);
      if (!tr) return;
      tr.querySelector(".committed").textContent = p.committed;
      tr.querySelector(".end").textContent = p.end === null ? "–" : p.end;
      const lag = tr.querySelector(".lag");
      lag.textContent = p.lag === null ? "–" : p.lag;
      lag.classList.toggle("warnt", !!p.lag);
    });
    // One line per dataset the console sent, in its order (total first, then each topic).
    d.datasets.forEach((ds, i) => {
      const color = kb.palette[i % kb.palette.length];
      if (!chart.data.datasets[i]) {
        chart.data.datasets.push({label: ds.label, data: [], borderWidth: i ? 1.5 : 2.5, pointRadius: 2,
          cubicInterpolationMode: "monotone", fill: false, borderColor: color, backgroundColor: color});
      }
      chart.data.datasets[i].label = ds.label;
    });
    chart.data.datasets.length = d.datasets.length;
    kb.setSeries(chart, d.datasets.map((ds) => ds.points.map((p) => ({x: p.t, y: p.y}))), 60000);
  });
});
