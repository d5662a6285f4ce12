// podprof's pages: a router on the path, and helpers the pages share. Everything is read
// from the aggregator's JSON API (/api/v1); nothing is loaded from elsewhere.
(() => {
  'use strict';

  const podprof = (window.podprof = window.podprof || {});

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
    try {
      body = text ? JSON.parse(text) : null;
    } catch {
      body = null;
    }
    if (!res.ok) {
      throw new Error((body && body.error) || `${res.status} ${res.statusText} for ${path}`);
    }
    return body;
  }

  // `value` with `decimals` places as C++'s "%.*f" (absl::StrFormat) writes it: the double's
  // exact value rounded to nearest, a tie to even. toFixed breaks a tie upwards instead (0.125 is
  // "0.13" there, "0.12" in C++; 100.5 "101", not "100"). A double is a tie at `decimals` places
  // exactly when value * 2^(decimals + 1) is an odd integer (0.5, 0.25, 0.125, ...).
  function toFixedEven(value, decimals) {
    const magnitude = Math.abs(value);
    const halves = magnitude * 2 ** (decimals + 1);
    if (!Number.isInteger(halves) || halves % 2 !== 1) return value.toFixed(decimals);
    const scale = 10 ** decimals;
    const below = Math.floor(magnitude * scale); // exact: magnitude * scale is below + 0.5
    const even = below % 2 === 0 ? below : below + 1;
    return `${value < 0 ? '-' : ''}${(even / scale).toFixed(decimals)}`;
  }

  // Durations for people, exactly as the CLI writes them (FormatDurationPs, common/clock.cc, and
  // FormatMeanPs, report/format.cc): ps in (a number or an int64's decimal string), the largest
  // unit among ps, ns, us, ms, s that keeps the number >= 1, three significant digits: "812 ps",
  // "1.23 ns", "45.6 us", "2.00 ms"; whole seconds from 1000 s ("3600 s"); "-" before a negative
  // one. A fractional ps (a mean) is rounded half away from zero first. "-" for no number.
  const DURATION_UNITS = [
    [1, 'ps'],
    [1e3, 'ns'],
    [1e6, 'us'],
    [1e9, 'ms'],
    [1e12, 's'],
  ];
  function fmtPs(ps) {
    if (ps === null || ps === undefined || ps === '') return '-';
    const n = Number(ps);
    if (!Number.isFinite(n)) return '-';
    const magnitude = Math.round(Math.abs(n));
    const last = DURATION_UNITS.length - 1;
    let u = 0;
    while (u < last && magnitude >= DURATION_UNITS[u + 1][0]) u++;
    let number;
    for (;;) {
      const value = magnitude / DURATION_UNITS[u][0];
      let decimals = u === 0 ? 0 : value < 10 ? 2 : value < 100 ? 1 : 0;
      number = toFixedEven(value, decimals);
      // Rounding may carry into another digit ("9.996" -> "10.00"): drop a decimal to stay at
      // three significant digits, or move to the next unit when the integer part reaches 1000.
      const point = number.indexOf('.');
      const integerDigits = point < 0 ? number.length : point;
      if (decimals > 0 && integerDigits + decimals > 3) {
        decimals = 3 - integerDigits;
        number = toFixedEven(value, decimals);
      }
      if (integerDigits > 3 && u < last) {
        u++;
        continue;
      }
      break;
    }
    return `${n < 0 && magnitude > 0 ? '-' : ''}${number} ${DURATION_UNITS[u][1]}`;
  }
  // The same for ns (the CLI's FormatDurationPs(ns * 1000)).
  const fmtNs = (ns) =>
    ns === null || ns === undefined || ns === '' ? '-' : fmtPs(Number(ns) * 1000);
  const fmtTime = (ns) =>
    new Date(ns / 1e6)
      .toISOString()
      .replace('T', ' ')
      .replace(/\.\d+Z$/, 'Z');
  // A fraction as a percentage with one decimal, "12.5%", rounded as report::Percent rounds.
  // Unlike Percent, which writes "-" for anything not positive, 0 is "0.0%" here.
  const fmtPct = (f) => (f === null || f === undefined ? '-' : `${toFixedEven(f * 100, 1)}%`);
  const fmtCount = (n) => Number(n).toLocaleString('en-US');

  // A capture's or a host's state as the API spells it, the store's lower-case names
  // ("running", "complete", "partial", "failed", "cancelled", "interrupted"), shown and styled
  // (app.css: .state-complete, ...) as given.
  function stateCell(status) {
    const s = String(status ?? '');
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
      document.body.dataset.ready = 'true'; // for tests: the page has drawn
      return;
    }
    showError(main, new Error(`no page at ${location.pathname}`));
  }

  async function agentsLine() {
    try {
      const a = await api('/api/v1/agents');
      const online = a.agents.filter((x) => x.state === 'online').length;
      document.getElementById('agents').textContent =
        `${online} of ${a.agents.length} agents online`;
    } catch {
      document.getElementById('agents').textContent = '';
    }
  }

  Object.assign(podprof, {el, api, fmtPs, fmtNs, fmtTime, fmtPct, fmtCount, stateCell, showError});
  window.addEventListener('DOMContentLoaded', () => {
    performance.mark('scripts-run');
    agentsLine();
    route();
  });
})();
