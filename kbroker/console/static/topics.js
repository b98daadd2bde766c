// Topics list: the rates in (and out) refreshed every 5 s, and a name filter.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const table = document.getElementById("topics");
  const rows = () => table.querySelectorAll("tbody tr[data-topic]");
  kb.poll(table.dataset.rates, 5000, (d) => {
    rows().forEach((tr) => {
      const name = tr.dataset.topic;
      for (const [kind, digits] of [["in", 1], ["out", 0]]) {
        const cell = tr.querySelector(`td[data-rate="${kind}"]`);
        const rates = d[kind];
        if (cell && rates && name in rates) cell.textContent = rates[name] === null ? "…" : kb.formatNumber(rates[name], digits);
      }
    });
  });
  const filter = document.getElementById("topic-filter");
  filter.addEventListener("input", () => {
    const q = filter.value.toLowerCase();
    rows().forEach((tr) => { tr.hidden = q !== "" && !tr.dataset.topic.toLowerCase().includes(q); });
  });
});
