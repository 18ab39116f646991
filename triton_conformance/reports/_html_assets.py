"""The HTML report's inline style and script (no user data in here: it is all in the DOM, escaped)."""

__all__ = ["CSS", "JS"]

# Outcome colours are not here: they come from the outcome table, inline on each element.

CSS = """
:root { --fg:#1d2125; --muted:#5f6b76; --line:#d8dde2; --bg:#fff; --panel:#f6f8fa; }
* { box-sizing: border-box; }
body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); margin: 0; }
header, main > section { padding: 12px 20px; }
header { background: var(--panel); border-bottom: 1px solid var(--line); }
h1 { font-size: 20px; margin: 0 0 8px; } h2 { font-size: 16px; margin: 8px 0; } h3 { font-size: 14px; margin: 14px 0 6px; }
dl.env { display: grid; grid-template-columns: repeat(auto-fill, minmax(190px, 1fr)); gap: 2px 16px; margin: 0; }
dl.env div { display: flex; gap: 6px; } dl.env div.wide { grid-column: 1 / -1; } dl.env dt { color: var(--muted); } dl.env dd { margin: 0; font-weight: 600; overflow-wrap: anywhere; }
.summary { display: flex; flex-wrap: wrap; gap: 8px; align-items: center; }
.count { border-radius: 4px; padding: 3px 8px; color: #fff; font-weight: 600; }
.bar { display: flex; height: 10px; width: 100%; margin-top: 8px; border-radius: 3px; overflow: hidden; }
.filters { display: flex; flex-wrap: wrap; gap: 6px 18px; align-items: center; }
.filters label { white-space: nowrap; cursor: pointer; }
.filters input[type=search] { padding: 3px 6px; min-width: 200px; }
.swatch { display: inline-block; width: 11px; height: 11px; border-radius: 2px; vertical-align: -1px; }
.matrix-wrap { overflow: auto; max-height: 78vh; border: 1px solid var(--line); }
table.matrix { border-collapse: separate; border-spacing: 0; }
table.matrix th, table.matrix td { border-right: 1px solid #eef0f2; border-bottom: 1px solid #eef0f2; }
table.matrix thead th { position: sticky; background: var(--bg); z-index: 2; font-weight: 600; }
table.matrix thead tr.dims th { top: 0; border-bottom: 1px solid var(--line); padding: 4px 6px; }
table.matrix thead tr.values th { top: 27px; height: 92px; vertical-align: bottom; padding: 2px 0; }
table.matrix thead th.single { vertical-align: bottom; padding: 2px 0; }
table.matrix thead tr.values th span, table.matrix thead th.single span { writing-mode: vertical-rl; transform: rotate(180deg); font-weight: 400; font-size: 12px; white-space: nowrap; }
table.matrix th.subject { position: sticky; left: 0; background: var(--bg); z-index: 1; text-align: left; padding: 2px 10px 2px 6px; white-space: nowrap; font-weight: 500; }
table.matrix thead th.subject { z-index: 3; }
tr.family-row th { text-align: left; background: var(--panel); padding: 4px 6px; font-weight: 700; position: sticky; left: 0; }
td.cell { padding: 0; width: 26px; height: 24px; text-align: center; }
td.cell a { display: block; width: 100%; height: 100%; line-height: 24px; color: #fff; text-decoration: none; font: 600 12px ui-monospace, monospace; }
td.cell a:focus-visible { outline: 3px solid #1f6feb; outline-offset: -3px; }
td.cell.none { background: repeating-linear-gradient(45deg, #fff, #fff 3px, #f0f0f0 3px, #f0f0f0 6px); }
td.cell.known a::after { content: "*"; }
td.cell { position: relative; }
td.cell.incidental::before { content: ""; position: absolute; top: 0; left: 0; border-style: solid;
  border-width: 8px 8px 0 0; border-color: #1d2125 transparent transparent transparent; pointer-events: none; }
td.cell.regressed { box-shadow: inset 0 0 0 3px #000; } td.cell.fixed { box-shadow: inset 0 0 0 3px #2e9d4f; }
td.cell.faded { opacity: 0.12; } td.cell.selected { box-shadow: inset 0 0 0 3px #1f6feb; }
.device { display: inline-block; font-size: 11px; padding: 0 5px; border-radius: 8px; background: #e3ecfa; color: #1d3f8c; margin-left: 6px; font-weight: 600; }
tr.divergence td.divergence-mark { background: #fff3c4; text-align: center; font-weight: 700; }
tr.divergence td.divergence-mark a { color: #7a4b00; text-decoration: none; }
td.cell.divergent { box-shadow: inset 0 0 0 2px #e0a800; }
ul.divergences li { margin: 2px 0; }
.badge { display: inline-block; font-size: 11px; padding: 0 5px; border-radius: 8px; background: #fde2e1; color: #8c1d18; margin-left: 6px; font-weight: 600; }
#panel { position: fixed; top: 0; right: 0; bottom: 0; width: min(46vw, 720px); background: var(--bg); border-left: 1px solid var(--line); box-shadow: -4px 0 12px rgba(0,0,0,.08); overflow: auto; padding: 12px 18px 40px; z-index: 10; }
#panel[hidden], .detail[hidden] { display: none; }
#panel .close { position: sticky; top: 0; float: right; font-size: 18px; border: 0; background: var(--panel); cursor: pointer; border-radius: 4px; padding: 0 8px; }
.detail h2 { margin-top: 0; } .detail .message { white-space: pre-wrap; overflow-wrap: anywhere; }
table.kv { border-collapse: collapse; } table.kv th { text-align: left; color: var(--muted); font-weight: 500; padding: 2px 14px 2px 0; vertical-align: top; }
table.kv td { padding: 2px 0; font-family: ui-monospace, monospace; font-size: 12.5px; overflow-wrap: anywhere; }
table.stats td { padding: 2px 10px 2px 0; } table.stats tr.rejected td { color: #d62f2f; font-weight: 600; }
pre { background: var(--panel); border: 1px solid var(--line); padding: 8px; overflow: auto; font-size: 12px; max-height: 420px; white-space: pre; }
button.copy { cursor: pointer; padding: 2px 10px; } .copied { color: #2e9d4f; margin-left: 8px; }
svg.plot { background: #fff; border: 1px solid var(--line); font-size: 10px; }
svg.plot .plot-title { font-weight: 600; font-size: 11px; } svg.plot .plot-frame { fill: none; stroke: #aab; }
svg.plot .grid { stroke: #eee; } svg.plot .axis { stroke: #889; } svg.plot .line { fill: none; stroke: #d62f2f; stroke-width: 1.5; }
svg.plot .dot { fill: #d62f2f; }
.diff ul { margin: 4px 0; padding-left: 20px; } .diff li { font-family: ui-monospace, monospace; font-size: 12.5px; }
.muted { color: var(--muted); }
ul.skips { margin: 8px 0 0; padding-left: 18px; font-size: 13px; } ul.skips li { cursor: help; }
ul.failing { margin: 4px 0; padding-left: 18px; }
ul.failing li { margin: 3px 0; font-size: 13px; } ul.failing li[data-known="1"] a { font-size: 12px; }
table.tensors th, table.tensors td { padding-right: 16px; } ul.failing li .count { font-size: 11px; padding: 1px 5px; }
ul.failing li a { font-family: ui-monospace, monospace; font-size: 12.5px; }
.failing-section h2 .muted { font-weight: 400; font-size: 13px; }
p.key { margin: 0 0 6px; font-size: 12.5px; }
p.incidental { background: #fff7e0; border-left: 3px solid #e0b21a; padding: 4px 8px; }
code.finding-key { color: var(--muted); font-size: 11.5px; }
.legend { display: flex; flex-wrap: wrap; gap: 12px 36px; align-items: flex-start; }
table.kv.legend-outcomes td, table.kv.legend-outcomes th { vertical-align: middle; font-family: inherit; font-size: 13px; }
.legend-cell { display: inline-block; width: 26px; height: 22px; line-height: 22px; text-align: center; font: 600 12px ui-monospace, monospace; position: relative; border: 1px solid #eef0f2; }
.legend-cell.none { background: repeating-linear-gradient(45deg, #fff, #fff 3px, #f0f0f0 3px, #f0f0f0 6px); }
.legend-cell.known::after { content: "*"; }
.legend-cell.incidental::before { content: ""; position: absolute; top: 0; left: 0; border-style: solid; border-width: 8px 8px 0 0; border-color: #1d2125 transparent transparent transparent; }
.legend-cell.regressed { box-shadow: inset 0 0 0 3px #000; } .legend-cell.fixed { box-shadow: inset 0 0 0 3px #2e9d4f; }
.legend-cells { display: grid; grid-template-columns: repeat(auto-fill, minmax(330px, 1fr)); gap: 4px 24px; flex: 1 1 600px; }
.legend-dim h4 { margin: 6px 0 2px; font-size: 13px; } .legend-dim dl { margin: 0; font-size: 12.5px; }
.legend-dim dl div { display: flex; gap: 8px; } .legend-dim dt { font-family: ui-monospace, monospace; min-width: 92px; font-weight: 600; } .legend-dim dd { margin: 0; }
svg.plot .boundary { stroke: #1d2125; stroke-dasharray: 4 3; stroke-width: 1.2; } svg.plot .boundary-label { font-weight: 600; }
"""

JS = r"""
(function () {
  "use strict";
  var panel = document.getElementById("panel");
  var current = null, selectedCell = null;
  function open(id) {
    var section = document.getElementById(id);
    if (!section) { return; }
    if (current) { current.hidden = true; }
    if (selectedCell) { selectedCell.classList.remove("selected"); }
    section.hidden = false; current = section; panel.hidden = false; panel.scrollTop = 0;
    var link = document.querySelector('td.cell a[href="#' + id + '"]');
    selectedCell = link ? link.parentNode : null;
    if (selectedCell && selectedCell.classList.contains("cell")) { selectedCell.classList.add("selected"); }
  }
  function close() {
    panel.hidden = true;
    if (selectedCell) { selectedCell.classList.remove("selected"); selectedCell = null; }
    if (location.hash) { history.replaceState(null, "", location.pathname + location.search); }
  }
  document.addEventListener("click", function (ev) {
    var a = ev.target.closest("a[data-detail]");
    if (a) { ev.preventDefault(); open(a.getAttribute("data-detail")); history.replaceState(null, "", "#" + a.getAttribute("data-detail")); return; }
    var btn = ev.target.closest("button.copy");
    if (btn) { copy(btn); return; }
    if (ev.target.closest("button.close")) { close(); }
  });
  document.addEventListener("keydown", function (ev) { if (ev.key === "Escape" && !panel.hidden) { close(); } });
  function copy(btn) {
    var text = document.getElementById(btn.getAttribute("data-target")).textContent;
    var done = function () { var s = btn.nextElementSibling; s.textContent = "copied"; setTimeout(function () { s.textContent = ""; }, 1500); };
    var fallback = function () {
      var area = document.createElement("textarea"); area.value = text; document.body.appendChild(area);
      area.select(); try { document.execCommand("copy"); done(); } finally { document.body.removeChild(area); }
    };
    if (navigator.clipboard && window.isSecureContext) { navigator.clipboard.writeText(text).then(done, fallback); } else { fallback(); }
  }
  var boxes = Array.prototype.slice.call(document.querySelectorAll("input[name=outcome]"));
  var search = document.getElementById("subject-filter");
  var family = document.getElementById("family-filter");
  var known = document.getElementById("known-filter");
  var device = document.getElementById("device-filter"), divergent = document.getElementById("divergent-filter");
  function applyFilters() {
    var shown = {};
    boxes.forEach(function (b) { shown[b.value] = b.checked; });
    var text = search.value.trim().toLowerCase(), fam = family.value, rows = 0;
    document.querySelectorAll("tbody.family").forEach(function (body) {
      var visibleInFamily = 0;
      body.querySelectorAll("tr.subject").forEach(function (tr) {
        var match = false;
        tr.querySelectorAll("td.cell[data-outcome]").forEach(function (td) {
          var on = shown[td.getAttribute("data-outcome")];
          td.classList.toggle("faded", !on); if (on) { match = true; }
        });
        var ok = match && (!fam || body.getAttribute("data-family") === fam)
          && (!text || tr.getAttribute("data-subject").toLowerCase().indexOf(text) >= 0)
          && (known.checked || tr.getAttribute("data-known") !== "1")
          && (!device || !device.value || tr.getAttribute("data-device") === device.value)
          && (!divergent || !divergent.checked || tr.getAttribute("data-divergent") === "1");
        tr.hidden = !ok; if (ok) { visibleInFamily += 1; rows += 1; }
      });
      body.querySelectorAll("tr.divergence").forEach(function (tr) {
        var name = tr.getAttribute("data-subject"), any = false;
        body.querySelectorAll("tr.subject").forEach(function (s) { if (!s.hidden && s.getAttribute("data-subject") === name) { any = true; } });
        tr.hidden = !any;
      });
      body.querySelector("tr.family-row").hidden = visibleInFamily === 0;
    });
    document.getElementById("visible-rows").textContent = String(rows);
  }
  boxes.concat([family, known, device, divergent]).forEach(function (el) { if (el) { el.addEventListener("change", applyFilters); } });
  search.addEventListener("input", applyFilters);
  document.getElementById("failing-only").addEventListener("click", function () {
    var failing = this.getAttribute("data-outcomes").split(" ");
    boxes.forEach(function (b) { b.checked = failing.indexOf(b.value) >= 0; }); applyFilters();
  });
  document.getElementById("show-all").addEventListener("click", function () {
    boxes.forEach(function (b) { b.checked = true; }); search.value = ""; family.value = ""; known.checked = true;
    if (device) { device.value = ""; } if (divergent) { divergent.checked = false; } applyFilters();
  });
  applyFilters();
  if (location.hash.length > 1) { open(location.hash.slice(1)); }
})();
"""
