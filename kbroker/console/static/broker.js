// A broker's configs: filter by name, or show only the editable (dynamic) ones.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const filter = document.getElementById("config-filter");
  const dynamicOnly = document.getElementById("config-dynamic-only");
  const rows = Array.from(document.querySelectorAll("#config-table tbody tr"));
  function apply() {
    const text = filter.value.trim().toLowerCase();
    rows.forEach((r) => {
      r.hidden = (text && !r.dataset.name.toLowerCase().includes(text)) ||
        (dynamicOnly.checked && !r.classList.contains("dynamic"));
    });
  }
  filter.addEventListener("input", apply);
  dynamicOnly.addEventListener("change", apply);
  apply();
});
