// Reassignments: reload while partitions are moving (not while a confirm dialog or a form is in use).
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const table = document.getElementById("reassignments");
  const ms = Number(table.dataset.refreshMs);
  if (ms > 0) setTimeout(() => window.location.reload(), ms);
});
