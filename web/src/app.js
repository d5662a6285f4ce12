// podprof's pages: a router on the path, and helpers the pages share. Everything is read
// from the aggregator's JSON API (/api/v1); nothing is loaded from elsewhere.
(() => {
'use strict';

const podprof = window.podprof = window.podprof || {};

// Builds an element: el('td', {class: 'num'}, 'text', child, ...).
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

// GET (or another method) as JSON; throws an Error with the API's own message.
async function api(path, options) {
  const res = await fetch(path, options);
  const text = await res.text();
  let body = null;
  try { body = text ? JSON.parse(text) : null; } catch (e) { body = null; }
  if (!res.ok) {
    throw new Error((body && body.error) || `${res.status} ${res.statusText} for ${path}`);
  }
  return body;
}

// Durations for people: ps in, "1.23 ms" out.
function fmtPs(ps) {
  if (ps === null || ps === undefined || isNaN(ps)) return '-';
  const units = [[1e12, 's'], [1e9, 'ms'], [1e6, 'us'], [1e3, 'ns']];
  for (const [d, u] of units) if (Math.abs(ps) >= d) return `${(ps / d).toFixed(ps / d >= 100 ? 0 : 2)} ${u}`;
  return `${Math.round(ps)} ps`;
}
const fmtNs = (ns) => fmtPs(ns * 1000);
const fmtTime = (ns) => new Date(ns / 1e6).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
const fmtPct = (f) => (f === null || f === undefined) ? '-' : `${(f * 100).toFixed(1)}%`;
const fmtCount = (n) => Number(n).toLocaleString('en-US');

function stateCell(status) {
  const s = String(status || '').toLowerCase().replace('capture_status_', '');
  return el('span', {class: `state-${s}`}, s);
}

function showError(where, err) {
  where.append(el('div', {class: 'error'}, String(err.message || err)));
}

// The views, by path.
const routes = [
  [/^\/$|^\/captures\/?$/, (m, main) => podprof.pages.captures(m, main)],
  [/^\/captures\/([^/]+)$/, (m, main) => podprof.pages.capture(decodeURIComponent(m[1]), main)],
  [/^\/kernels\/([^/]+)$/, (m, main) => podprof.pages.kernel(decodeURIComponent(m[1]), main)],
  [/^\/diff$/, (m, main) => podprof.pages.diff(m, main)],
];

async function route() {
  const main = document.getElementById('main');
  main.replaceChildren();
  for (const [re, page] of routes) {
    const m = location.pathname.match(re);
    if (!m) continue;
    try {
      await page(m, main);
    } catch (err) {
      showError(main, err);
    }
    performance.mark('page-ready');
    document.body.dataset.ready = 'true';  // for tests: the page has drawn
    return;
  }
  showError(main, new Error(`no page at ${location.pathname}`));
}

async function agentsLine() {
  try {
    const a = await api('/api/v1/agents');
    const online = a.agents.filter((x) => x.state === 'online').length;
    document.getElementById('agents').textContent = `${online} of ${a.agents.length} agents online`;
  } catch (err) {
    document.getElementById('agents').textContent = '';
  }
}

Object.assign(podprof, {el, api, fmtPs, fmtNs, fmtTime, fmtPct, fmtCount, stateCell, showError});
window.addEventListener('DOMContentLoaded', () => { performance.mark('scripts-run'); agentsLine(); route(); });
})();
