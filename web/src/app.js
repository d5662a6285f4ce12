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

  // A finite double's exact value as an integer and a count of decimal places: |value| is
  // digits / 10^places. Every double is a binary fraction, so this is exact; printf rounds
  // from it.
  function exactDecimal(value) {
    const view = new DataView(new ArrayBuffer(8));
    view.setFloat64(0, Math.abs(value));
    const bits = view.getBigUint64(0);
    const biased = Number(bits >> 52n);
    const mantissa = (bits & ((1n << 52n) - 1n)) | (biased ? 1n << 52n : 0n);
    const exp2 = Math.max(biased, 1) - 1075;
    return exp2 >= 0
      ? {digits: mantissa << BigInt(exp2), places: 0}
      : {digits: mantissa * 5n ** BigInt(-exp2), places: -exp2};
  }

  // digits / 10^drop rounded to nearest, a tie to even, as C's printf rounds; drop <= 0 scales
  // up.
  function roundDecimal(digits, drop) {
    if (drop <= 0) return digits * 10n ** BigInt(-drop);
    const divisor = 10n ** BigInt(drop);
    const quotient = digits / divisor;
    const twice = (digits % divisor) * 2n;
    return twice > divisor || (twice === divisor && quotient % 2n === 1n)
      ? quotient + 1n
      : quotient;
  }

  // The sign printf writes: "-" for a negative value, -0 too, and `plus` ("+" for "%+") else.
  const signOf = (value, plus) => (value < 0 || Object.is(value, -0) ? '-' : plus);
  const nonFinite = (value, plus) =>
    `${value < 0 ? '-' : plus}${Number.isNaN(value) ? 'nan' : 'inf'}`;

  // `value` as C's "%.*f" (absl::StrFormat) writes it, `plus` "+" for "%+.*f". toFixed rounds
  // a tie upwards (0.125 is "0.13" there, "0.12" in C++) and -0 without its sign.
  function printfFixed(value, decimals, plus = '') {
    if (!Number.isFinite(value)) return nonFinite(value, plus);
    const {digits, places} = exactDecimal(value);
    const n = roundDecimal(digits, places - decimals)
      .toString()
      .padStart(decimals + 1, '0');
    const body = decimals ? `${n.slice(0, -decimals)}.${n.slice(-decimals)}` : n;
    return signOf(value, plus) + body;
  }

  // `value` as C's "%.*g" writes it: `precision` significant digits (0 is 1), in exponent form
  // ("1.235e+07") when the exponent is below -4 or not below the precision, trailing zeros and
  // a bare point dropped. toPrecision keeps the zeros and writes "1.235e+7".
  function printfG(value, precision) {
    if (!Number.isFinite(value)) return nonFinite(value, '');
    const p = Math.max(precision, 1);
    const {digits, places} = exactDecimal(value);
    const length = digits.toString().length;
    let mantissa = roundDecimal(digits, length - p);
    let exponent = digits === 0n ? 0 : length - 1 - places;
    if (mantissa.toString().length > p) {
      mantissa /= 10n; // rounding carried into a new digit: 9.9995 at 4 digits is 1.000e+01
      exponent++;
    }
    const trim = (s) => (s.includes('.') ? s.replace(/\.?0*$/, '') : s);
    if (exponent >= -4 && exponent < p) return trim(printfFixed(value, p - 1 - exponent));
    const m = mantissa.toString();
    const e = `${exponent < 0 ? '-' : '+'}${String(Math.abs(exponent)).padStart(2, '0')}`;
    return `${signOf(value, '')}${trim(`${m[0]}.${m.slice(1)}`)}e${e}`;
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
  const absent = (v) => v === null || v === undefined || v === '';
  function fmtPs(ps) {
    if (absent(ps)) return '-';
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
      number = printfFixed(value, decimals);
      // Rounding may carry into another digit ("9.996" -> "10.00"): drop a decimal to stay at
      // three significant digits, or move to the next unit when the integer part reaches 1000.
      const point = number.indexOf('.');
      const integerDigits = point < 0 ? number.length : point;
      if (decimals > 0 && integerDigits + decimals > 3) {
        decimals = 3 - integerDigits;
        number = printfFixed(value, decimals);
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
  const fmtNs = (ns) => (absent(ns) ? '-' : fmtPs(Number(ns) * 1000));
  // A capture's length as `podprof captures` shows it (CaptureDuration, cli/capture_rows.cc):
  // "-" until it has a start and an end after it (a running capture's end is 0).
  const fmtSpan = (startNs, endNs) =>
    startNs > 0 && endNs > startNs ? fmtNs(endNs - startNs) : '-';

  // A signed ns quantity with its unit, as report::FormatSignedNs writes clock corrections and
  // their uncertainty: "812 ns", "-626.80 us", "-3.745 ms", "1.250 s". "-" for no number.
  function fmtSignedNs(ns) {
    if (absent(ns) || !Number.isFinite(Number(ns))) return '-';
    const n = Number(ns);
    const a = Math.abs(n);
    if (a < 1e3) return `${Math.trunc(n)} ns`;
    if (a < 1e6) return `${printfFixed(n / 1e3, 2)} us`;
    if (a < 1e9) return `${printfFixed(n / 1e6, 3)} ms`;
    return `${printfFixed(n / 1e9, 3)} s`;
  }

  // ns since the Unix epoch as report::FormatTimestampNs writes it: UTC ISO-8601 to the
  // millisecond, cut (not rounded), "2024-05-01T12:00:00.123Z"; 0 (unknown) is "-". An int64's
  // decimal string keeps every digit; a number has the digits it kept.
  function fmtTime(ns) {
    if (absent(ns) || Number(ns) === 0) return '-';
    const exact = BigInt(typeof ns === 'number' ? Math.trunc(ns) : ns);
    const ms = exact / 1000000n - (exact % 1000000n < 0n ? 1n : 0n); // floor, as absl
    return new Date(Number(ms)).toISOString();
  }

  // A fraction as a percentage with one decimal, "12.5%", or "-" when it is not positive (no
  // work, unknown peak) or absent: report::Percent, for the figures where the CLI uses it.
  const fmtPct = (f) => (f > 0 ? `${printfFixed(f * 100, 1)}%` : '-');
  // A measured share, 0 too ("0.0%"), as report::ShareCell writes busy units, throttling and
  // Utilization Viewer shares; "-" where it was not measured (absent).
  const fmtShare = (f) => (absent(f) ? '-' : `${printfFixed(100 * Number(f), 1)}%`);
  // A relative change, "+5.2%", "-0.3%", as report::FormatChange writes `podprof diff`'s ΔMEAN%.
  const fmtChange = (c) => (absent(c) ? '-' : `${printfFixed(Number(c) * 100, 1, '+')}%`);
  // A rate in TFLOP/s to two decimals, "-" where it is 0 (no cost model, an async op), as
  // report::FormatTflops.
  const fmtTflops = (t) => (t > 0 ? printfFixed(Number(t), 2) : '-');
  // A clock's drift, "+1.25 ppm", as report::FormatPpm writes `podprof agents`' DRIFT.
  const fmtPpm = (ppm) => (absent(ppm) ? '-' : `${printfFixed(Number(ppm), 2, '+')} ppm`);
  // `digits` significant digits as report::FormatSignificant ("%.*g"): a Utilization Viewer
  // count ("1.235e+07", "512"), the threshold of a diff ("5" of 5%).
  const fmtSignificant = (v, digits) => (absent(v) ? '-' : printfG(Number(v), digits));

  // A count as the CLI writes it (absl::StrCat of the integer): all its digits, no separators,
  // "1234567". An int64's decimal string keeps every digit.
  const fmtCount = (n) => {
    if (absent(n)) return '-';
    if (typeof n === 'number' && !Number.isInteger(n)) return String(n);
    return BigInt(n).toString();
  };
  // "1 capture", "2 captures", as report::CountOf.
  const countOf = (n, noun) => `${fmtCount(n)} ${noun}${Number(n) === 1 ? '' : 's'}`;

  // A byte count as report::FormatBytes writes it: "512 B", "1.2 kB", "3.4 MB" (powers of 1000,
  // up to TB).
  function fmtBytes(bytes) {
    if (absent(bytes)) return '-';
    if (BigInt(bytes) < 1000n) return `${BigInt(bytes)} B`;
    const units = ['kB', 'MB', 'GB', 'TB'];
    let v = Number(BigInt(bytes));
    let u = -1;
    while (v >= 1000 && u < units.length - 1) {
      v /= 1000;
      ++u;
    }
    return `${printfFixed(v, 1)} ${units[u]}`;
  }

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
    [/^\/pod$/, (m, main) => podprof.pages.pod(m, main)],
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

  Object.assign(podprof, {
    el,
    api,
    fmtPs,
    fmtNs,
    fmtSpan,
    fmtSignedNs,
    fmtTime,
    fmtPct,
    fmtShare,
    fmtChange,
    fmtTflops,
    fmtPpm,
    fmtSignificant,
    fmtCount,
    countOf,
    fmtBytes,
    stateCell,
    showError,
  });
  window.addEventListener('DOMContentLoaded', () => {
    performance.mark('scripts-run');
    agentsLine();
    route();
  });
})();
