"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const canvas = document.getElementById("throughput-chart");
  const chart = kb.lineChart(canvas, "messages/s", [{label: "messages in/s", data: []}]);
  kb.poll(canvas.dataset.source, 3000, (d) => {
    document.getElementById("rate-now").textContent = d.rate === null ? "…" : kb.formatNumber(d.rate);
    kb.setSeries(chart, [d.series.map((p) => ({x: p.t, y: p.rate}))]);
  });
});
