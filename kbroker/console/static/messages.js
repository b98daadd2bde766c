// Messages: switch how keys, values and headers are shown (per message or for the page), and the live tail.
// Record data only ever goes into the page through textContent.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const FORMATS = ["auto", "text", "json", "hex"];
  const table = document.getElementById("messages");
  const pageFormat = document.getElementById("page-format");

  // Show one field as fmt: its auto choice for "auto", and for "json" when it is not JSON.
  function showAs(pre, fmt) {
    let choice = fmt === "auto" || !(fmt in pre.dataset) ? pre.dataset.auto : fmt;
    if (fmt === "json" && !("json" in pre.dataset)) pre.title = "not JSON: shown as " + choice;
    else pre.removeAttribute("title");
    pre.textContent = pre.dataset[choice];
    pre.dataset.shown = choice;
  }
  function showRow(tr, fmt) { tr.querySelectorAll("pre.field").forEach((pre) => showAs(pre, fmt)); }

  if (!table) return;
  table.addEventListener("change", (ev) => {
    if (ev.target.classList.contains("row-format")) showRow(ev.target.closest("tr"), ev.target.value);
  });
  pageFormat.addEventListener("change", () => {
    table.dataset.format = pageFormat.value;
    table.querySelectorAll("tbody tr").forEach((tr) => {
      const select = tr.querySelector("select.row-format");
      if (select) select.value = pageFormat.value;
      showRow(tr, pageFormat.value);
    });
  });

  // ---- live tail: poll tail.json from the next offset and append each new record as a row --------------------
  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function field(v) {
    if (v.null) return el("span", "null muted", "null");
    if (v.size === 0) return el("span", "muted", "(empty)");
    const pre = el("pre", "field");
    for (const f of ["auto", "text", "json", "hex"]) if (v[f] !== undefined) pre.dataset[f] = v[f];
    const frag = document.createDocumentFragment();
    frag.append(pre);
    if (v.cut) frag.append(el("div", "muted small", "first 64 KiB of " + v.size + " bytes"));
    return frag;
  }
  function row(r) {
    const tr = el("tr", "tailed");
    tr.dataset.offset = r.offset;
    tr.append(el("td", "num mono", String(r.offset)));
    const ts = el("td", "small");
    const when = el("span", "mono", r.when);
    when.title = String(r.timestamp);
    ts.append(when, el("div", "muted", r.timestamp_type + " · " + r.codec));
    const key = el("td", "key"), value = el("td", "value"), headers = el("td", "headers");
    key.append(field(r.key));
    value.append(field(r.value));
    if (!r.headers.length) headers.append(el("span", "muted", "–"));
    for (const [name, v] of r.headers) {
      const h = el("div", "header");
      h.append(el("span", "mono hname", name), ": ", field(v));
      headers.append(h);
    }
    const pick = el("td");
    const select = el("select", "row-format");
    select.setAttribute("aria-label", "show this message as");
    for (const f of FORMATS) select.append(el("option", "", f));
    select.value = table.dataset.format;
    pick.append(select);
    tr.append(ts, key, value, headers, pick);
    showRow(tr, table.dataset.format);
    return tr;
  }

  const button = document.getElementById("tail");
  const status = document.getElementById("position");
  const body = table.querySelector("tbody");
  let tailing = false, next = null, timer = null;
  async function poll() {
    if (!tailing) return;
    const url = new URL(button.dataset.source, window.location.href);
    if (next !== null) url.searchParams.set("offset", next);
    if (button.dataset.filter) url.searchParams.set("filter", button.dataset.filter);
    try {
      const d = await kb.getJSON(url.pathname + url.search);
      kb.clusterOk();
      if (!tailing) return;
      const none = document.getElementById("no-records");
      if (none && d.records.length) none.remove();
      for (const r of d.records) body.append(row(r));
      while (body.rows.length > 1000) body.deleteRow(0);
      next = d.next;
      status.textContent = "Live tail: waiting for offset " + next + " · " + body.rows.length + " shown";
    } catch (e) {
      kb.clusterFailed(e.message);
    }
    if (tailing) timer = setTimeout(poll, 1500);
  }
  button.addEventListener("click", () => {
    tailing = !tailing;
    button.textContent = tailing ? "Stop tail" : "Live tail";
    button.classList.toggle("primary", tailing);
    if (tailing) {
      // From the end of this page when it reached the partition's end, else from the partition's end.
      next = document.getElementById("newer") ? null : Number(button.dataset.next);
      poll();
    } else if (timer) {
      clearTimeout(timer);
    }
  });
});
