"""The dashboard's one stylesheet, served at ``/dashboard/static/dashboard.css``.

Kept as a string in a module so it ships with the package without package-data. Calm and
legible: the system font stack, one accent colour, cards on a light grey page; charts scale
to their container (each drawn twice, wide and for a phone, the stylesheet showing the one
whose text stays at least 10 px), and tables scroll sideways inside a wrapper whose edge shadows
say there is more, so pages fit 375 px as well as 1280.
"""

from __future__ import annotations

import hashlib

CSS = """
:root {
  --ink: #0f172a; --muted: #64748b; --line: #e2e8f0; --page: #f6f7f9; --card: #ffffff;
  --accent: #2563eb; --accent-soft: #dbe6fd; --warn-bg: #fff7e6; --warn: #92400e;
  --error: #b91c1c; --floor: #dc2626;
}
* { box-sizing: border-box; }
html { -webkit-text-size-adjust: 100%; }
body {
  margin: 0; background: var(--page); color: var(--ink);
  font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial,
    "Noto Sans", sans-serif;
}
a { color: var(--accent); text-decoration: none; }
a:hover, a:focus-visible { text-decoration: underline; }
code { font: 0.9em ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
.top {
  display: flex; flex-wrap: wrap; align-items: center; gap: 0.5rem 1.25rem;
  padding: 0.75rem clamp(1rem, 4vw, 2rem); background: var(--card);
  border-bottom: 1px solid var(--line);
}
.brand { font-weight: 700; color: var(--ink); letter-spacing: -0.01em; }
.brand::before {
  content: ""; display: inline-block; width: 0.7rem; height: 0.7rem; margin-right: 0.45rem;
  border-radius: 50%; background: var(--accent); vertical-align: 0.02em;
}
nav { display: flex; gap: 1rem; }
nav a { color: var(--muted); font-weight: 500; padding: 0.2rem 0; }
nav a[aria-current="page"] { color: var(--ink); border-bottom: 2px solid var(--accent); }
nav.pages { margin-top: 1rem; align-items: baseline; }
nav.pages p { margin: 0; color: var(--muted); }
.sign-out { margin-left: auto; }
main {
  max-width: 72rem; margin: 0 auto; padding: 1.25rem clamp(0.75rem, 4vw, 2rem) 2rem;
  display: grid; gap: 1rem;
}
footer { text-align: center; color: var(--muted); font-size: 0.8rem; padding: 0 1rem 2rem; }
h1 { font-size: 1.6rem; line-height: 1.2; margin: 0; letter-spacing: -0.015em; word-break: break-word; }
h2 { font-size: 1.1rem; margin: 0; }
.heading { display: grid; gap: 0.25rem; }
.crumb { margin: 0; color: var(--muted); font-size: 0.85rem; }
.lede, .meta { margin: 0; color: var(--muted); }
.meta { font-size: 0.875rem; }
.meta strong { color: var(--ink); font-weight: 600; }
.card {
  background: var(--card); border: 1px solid var(--line); border-radius: 10px;
  padding: clamp(0.75rem, 3vw, 1.25rem); display: grid; gap: 0.75rem; min-width: 0;
}
.card.narrow { max-width: 28rem; width: 100%; justify-self: center; }
.card-head { display: grid; gap: 0.2rem; }
svg.chart { display: block; width: 100%; height: auto; font-family: inherit; }
svg.wide-chart { max-width: none; }
svg.narrow-chart { max-width: 32rem; }
.chart-pair > .narrow-chart { display: none; }
.multiples {
  display: grid; gap: 1rem 1.5rem;
  grid-template-columns: repeat(auto-fill, minmax(min(100%, 17rem), 1fr));
}
svg.sparkline { display: block; width: 120px; height: 28px; }
svg.swatch { width: 0.7rem; height: 0.7rem; display: inline-block; vertical-align: -0.05em; }
.legend {
  list-style: none; margin: 0; padding: 0; display: flex; flex-wrap: wrap; gap: 0.25rem 1rem;
  font-size: 0.85rem;
}
.legend li { display: inline-flex; align-items: center; gap: 0.35rem; }
figure.slice { margin: 0; min-width: 0; display: grid; gap: 0.2rem; align-content: start; }
.suppressed-note {
  margin: 0; padding: 0.5rem 0.75rem; border: 1px dashed #cbd5e1; border-radius: 8px;
  color: var(--muted); font-size: 0.9rem;
}
.slice-name { color: var(--ink); font-weight: 600; white-space: nowrap; }
tr.suppressed .sub { white-space: normal; }
#shuffled thead th, #shuffled td:last-child { white-space: normal; }
#breakdown-entry #breakdown-picker { border: 0; padding: 0; }
.gaps { margin: 0; color: var(--muted); font-size: 0.875rem; }
.key { margin: 0; font-size: 0.8rem; color: var(--muted); display: flex; flex-wrap: wrap; align-items: center; gap: 0.4rem; }
.key-floor {
  display: inline-block; width: 0; height: 1rem; margin-left: 0.6rem;
  border-left: 2px dashed var(--floor);
}
.key-bar { display: inline-block; width: 1.2rem; height: 0.6rem; background: #bfd3fb; border-radius: 2px; }
.key-whisker {
  display: inline-block; width: 1.2rem; height: 0.6rem; margin-left: 0.6rem;
  border: 2px solid var(--ink); border-top: 0; border-bottom: 0; position: relative;
  background: linear-gradient(var(--ink), var(--ink)) center / 100% 2px no-repeat;
}
.scroll {
  overflow-x: auto; max-width: 100%; -webkit-overflow-scrolling: touch; border-radius: 8px;
  background:
    linear-gradient(to right, var(--card) 45%, rgb(255 255 255 / 0)) left center / 2.5rem 100% no-repeat local,
    linear-gradient(to left, var(--card) 45%, rgb(255 255 255 / 0)) right center / 2.5rem 100% no-repeat local,
    radial-gradient(farthest-side at 0 50%, rgb(15 23 42 / 0.28), rgb(15 23 42 / 0)) left center / 0.9rem 100% no-repeat scroll,
    radial-gradient(farthest-side at 100% 50%, rgb(15 23 42 / 0.28), rgb(15 23 42 / 0)) right center / 0.9rem 100% no-repeat scroll,
    var(--card);
}
table { border-collapse: collapse; width: 100%; font-size: 0.875rem; }
th, td { padding: 0.45rem 0.6rem; border-bottom: 1px solid var(--line); text-align: left; white-space: nowrap; }
thead th { color: var(--muted); font-weight: 600; font-size: 0.8rem; }
tbody th { font-weight: 600; }
tbody tr:hover { background: #f8fafc; }
.num { text-align: right; font-variant-numeric: tabular-nums; }
.sub { display: block; color: var(--muted); font-weight: 400; font-size: 0.78rem; }
td.spark { padding-top: 0.2rem; padding-bottom: 0.2rem; }
td.change { white-space: nowrap; font-variant-numeric: tabular-nums; }
td.change.higher, td.change.lower { color: #1e3a8a; font-weight: 600; }
td.change.none { color: #64748b; font-size: 0.85em; }
td.empty { color: var(--muted); white-space: normal; }
tr.advised { background: var(--accent-soft); }
tr.total > * { font-weight: 700; border-top: 2px solid var(--ink); }
blockquote {
  margin: 0; padding: 0.75rem 1rem; border-left: 4px solid var(--accent); background: #f8fafc;
  border-radius: 0 8px 8px 0; font-size: 0.95rem; max-width: 48rem;
}
form { display: flex; flex-wrap: wrap; gap: 0.75rem; align-items: flex-end; }
#pickers, #breakdown-picker { background: var(--card); border: 1px solid var(--line); border-radius: 10px; padding: 0.75rem; }
#sign-in { display: grid; gap: 0.5rem; align-items: stretch; }
label { display: grid; gap: 0.2rem; font-size: 0.8rem; color: var(--muted); font-weight: 500; }
input, select {
  font: inherit; color: var(--ink); padding: 0.4rem 0.55rem; border: 1px solid #cbd5e1;
  border-radius: 6px; background: #fff; min-width: 0; width: 9.5rem; max-width: 100%;
}
select { width: auto; }
#sign-in input { width: 100%; }
input[type="number"] { width: 7rem; }
input:focus, select:focus, button:focus-visible { outline: 2px solid var(--accent); outline-offset: 1px; }
button {
  font: inherit; font-weight: 600; color: #fff; background: var(--accent); border: 0;
  border-radius: 6px; padding: 0.45rem 1rem; cursor: pointer;
}
button.quiet { background: transparent; color: var(--muted); border: 1px solid var(--line); font-weight: 500; padding: 0.3rem 0.75rem; }
.actions { margin: 0; }
.yours { margin: 0.25rem 0 0; padding: 0; list-style: none; display: grid; gap: 0.15rem; }
.yours li:first-child { font-size: 1.05rem; }
details.help { font-size: 0.875rem; }
details.help summary, details.rows summary { cursor: pointer; color: var(--accent); }
.glossary { margin: 0.4rem 0 0; display: grid; gap: 0.3rem; font-size: 0.875rem; }
.glossary div { display: grid; grid-template-columns: minmax(6rem, max-content) 1fr; gap: 0.75rem; }
.glossary dt { font-weight: 600; font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
.glossary dd { margin: 0; color: var(--muted); }
#metrics tr.stopped > * { background: #fef3c7; }
@media (min-width: 601px) { #metrics tbody th { min-width: 11rem; } }
#metrics tbody th .sub { white-space: normal; }
#metrics tr.stopped .arrival { color: var(--warn); font-weight: 600; }
#arrivals.stopped { color: var(--warn); background: #fef3c7; padding: 0.2rem 0.5rem; border-radius: 6px; }
.presets { display: flex; flex-wrap: wrap; gap: 0.35rem; flex-basis: 100%; }
.presets a {
  padding: 0.25rem 0.7rem; border: 1px solid var(--line); border-radius: 999px; font-size: 0.85rem;
}
.presets a[aria-current] { background: var(--accent-soft); border-color: var(--accent); font-weight: 600; }
label.check { display: flex; align-items: center; font-size: 0.85rem; color: var(--ink); }
label.check input { width: auto; margin: 0 0.35rem 0 0; vertical-align: -0.1em; }
.csv::before { content: "↓ "; }
.note {
  margin: 0; padding: 0.6rem 0.8rem; border-radius: 8px; background: var(--warn-bg);
  color: var(--warn); border: 1px solid #fde3b0; font-size: 0.9rem;
}
.error { margin: 0; color: var(--error); font-weight: 500; }
.big { display: block; font-size: 1.9rem; font-weight: 700; margin: 0; letter-spacing: -0.02em; font-variant-numeric: tabular-nums; }
.answer { display: flex; flex-wrap: wrap; gap: 1rem 3rem; }
.answer .label { display: block; color: var(--muted); font-size: 0.8rem; font-weight: 500; }
.empty-state h3 { font-size: 0.95rem; margin: 0.25rem 0 0; }
pre.snippet {
  margin: 0; padding: 0.6rem 0.8rem; background: #0f172a; color: #e2e8f0; border-radius: 8px;
  overflow-x: auto; font-size: 0.85rem; line-height: 1.45; max-width: 100%;
}
pre.snippet code { font-size: inherit; }
.note.pooled { background: #f1f5f9; color: var(--ink); border-color: var(--line); }
abbr.mark { text-decoration: none; cursor: help; }
#pooling-help p { margin: 0; max-width: 48rem; }
@media (min-width: 601px) {
  #metrics tbody th { white-space: normal; min-width: 9rem; max-width: 15rem; }
  #metrics td.change.none { white-space: normal; min-width: 6.5rem; }
}
@media (max-width: 720px) {
  .chart-pair > .wide-chart { display: none; }
  .chart-pair > .narrow-chart { display: block; }
}
@media (max-width: 600px) {
  h1 { font-size: 1.3rem; }
  #metrics > * > tr > :nth-child(2),
  #metrics > * > tr > :nth-child(3),
  #metrics > * > tr > :nth-child(4),
  #metrics > * > tr > :nth-child(6) { display: none; }
  #account > * > tr > :nth-child(2),
  #account > * > tr > :nth-child(3),
  #account > * > tr > :nth-child(4),
  #account > * > tr > :nth-child(5),
  #account > * > tr > :nth-child(6),
  #account > * > tr > :nth-child(7) { display: none; }
  #metrics th, #metrics td, #account th, #account td { padding-left: 0.35rem; padding-right: 0.35rem; }
  #metrics thead th, #account thead th { white-space: normal; }
  #metrics tbody th, #account tbody th { white-space: normal; overflow-wrap: normal; }
  svg.sparkline { width: 60px; }
  input { width: 8rem; }
  .big { font-size: 1.5rem; }
}
"""

ETAG = '"' + hashlib.sha256(CSS.encode()).hexdigest()[:16] + '"'
"""The stylesheet's ETag: it changes only with a new release."""
