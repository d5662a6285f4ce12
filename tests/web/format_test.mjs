// The pages' number formatting (web/src/app.js: durations, clock corrections, percentages and
// shares, relative changes, rates, drift, significant digits, timestamps, bytes and counts)
// against the CLI's own functions (FormatDurationPs, report::FormatMeanPs, report::Percent,
// ...: the list in format_cases.cc), string for string: every case goes through
// tests/web/format_cases.cc, the C++ functions themselves, and app.js, loaded in a bare context
// (no browser) as pageFormatting() loads it. Label unit, through ctest:
//   node tests/web/format_test.mjs --cases build/tests/web_format_cases
import {spawnSync} from 'node:child_process';

import {pageFormatting} from './page_formatting.mjs';

const argv = process.argv.slice(2);
const casesAt = argv.indexOf('--cases');
if (casesAt < 0 || !argv[casesAt + 1]) {
  console.error('usage: format_test.mjs --cases PATH/web_format_cases');
  process.exit(2);
}
const casesBin = argv[casesAt + 1];
const P = pageFormatting();

// Durations (ps): FormatDurationPs's own unit-test table (tests/common/clock_test.cc), then
// every unit edge, the values where rounding carries into another digit or unit, exact ties
// (which C++ rounds to even and toFixed up), the int64 extremes, and a deterministic spread.
const INT64_MAX = '9223372036854775807';
const INT64_MIN = '-9223372036854775808';
const words = (text) => text.trim().split(/\s+/);
const durations = new Set([
  // FormatDurationPs's own table (tests/common/clock_test.cc, UsesThreeSignificantDigits).
  ...words(`
    0 7 812 999 1000 1234 45600000 2000000000 1500000000000 123456789 -37500000000 -812 9996
    99960 999600 999499 3600000000000000
  `),
  INT64_MIN,
  INT64_MAX,
  ...words(`
    1 -1 45600 45650 45660 100500 101500 1125 1375 10250 10750 999500 999999 1000000 9995 9994
    99949 99950 999999999999 1000000000000 999500000000000 999999999999999 1000000000000000
    1000500000000000 2500000000000 12345678901234567
  `),
]);
for (let p = 1n; p < 10n ** 18n; p *= 10n) {
  for (const m of [1n, 5n, 9n, 10n, 11n, 99n, 100n, 101n, 995n, 996n, 999n, 1000n, 1005n]) {
    for (const v of [p * m, p * m - 1n, p * m + 1n, (p * m) / 2n]) {
      if (v <= BigInt(INT64_MAX)) durations.add(String(v)).add(String(-v));
    }
  }
}
let seed = 12345;
const random = () => (seed = (seed * 16807) % 2147483647) / 2147483647; // Park-Miller
for (let i = 0; i < 3000; i++) {
  durations.add(String(Math.floor(10 ** (random() * 16)) * (random() < 0.1 ? -1 : 1)));
}
// Means (fractional ps).
const means = ['0.4', '0.5', '1.5', '2.5', '-2.5', '999.5', '45649.5', '1234.567', '1e15'];
for (let i = 0; i < 500; i++) means.push(String(10 ** (random() * 12)));
// Fractions: shares and percentages, with 0, -0 and below (Percent writes "-" for them,
// ShareCell "0.0%" and "-0.0%"), exact ties at a tenth of a percent, and a spread.
const fractions = words(`
  0.00125 0.125 0.5 1 0.0005 0.0015 0.00025 0.99999 0 -0 -0.5 -0.00049 1e-300 5e-324 0.000499
  0.000501 1.5 12.5 0.0625 0.9995 -0.0005 nan inf -inf
`);
for (let i = 0; i < 500; i++) fractions.push(String(random()));
for (let i = 0; i < 200; i++) fractions.push(String((random() - 0.5) * 4));
// Relative changes: the fractions, and slowdowns and speedups of many times.
const changes = [...fractions, '-1', '3.5', '1000', '-0.99951', '0.01234', '-0.03456'];
for (let i = 0; i < 200; i++) changes.push(String((random() - 0.3) * 10 ** (random() * 3)));
// TFLOP/s, drift in ppm: a spread with ties at two decimals (0.125, 1.005 is not one) and 0.
const rates = words(`
  0 -0 -1 0.005 0.015 0.125 1.125 1.005 123.456 918.75 1e-9 99.995 0.004999 nan inf -inf
`);
for (let i = 0; i < 300; i++) rates.push(String(random() * 10 ** (random() * 4)));
// Their negatives too, but for NaN's: a JavaScript NaN has no sign to write ("-nan").
const negated = rates.filter((v) => v !== 'nan').map((v) => (v[0] === '-' ? v.slice(1) : `-${v}`));
const drifts = [...rates, ...negated];
for (let i = 0; i < 200; i++) drifts.push(String(Math.round((random() - 0.5) * 40000) / 1000));
// Significant digits ("%.*g"): where the exponent form starts (1e-4 and 10^digits), where
// rounding carries into a new digit (9.9995 at 4 digits), ties, zeros, the double's extremes.
const significant = [];
const forG = words(`
  0 -0 1 -1 0.0001 0.00009999 0.000099995 1e-5 9.9995 99995 999950 9999.5 12345678 1234.5
  0.125 2.5 3.5 25 125 1e21 1e-300 5e-324 1.7976931348623157e308 123456 1234567 100000 1000000
  5 2.5 0.05 7.0e5 6.02e23 -12345.678 nan inf -inf
`);
for (const digits of [0, 1, 2, 3, 4, 6, 10, 17]) {
  for (const v of [...forG, ...means.slice(0, 80), ...fractions.slice(0, 80)]) {
    significant.push(`${digits} ${v}`);
  }
}
// Timestamps (ns since the epoch): the durations are int64s over the whole range, 0 is "-".
// Bytes and counts: the durations that are not negative, and uint64's largest.
const unsigned = [...durations].filter((v) => !v.startsWith('-'));
unsigned.push('18446744073709551615', '18446744073709551614', '999', '1000', '999949', '999950');
const safe = (v) => Number.isSafeInteger(Number(v));
// A double as C++'s SimpleAtod reads it: JavaScript spells infinity otherwise.
const num = (v) => Number(v.replace(/inf$/, 'Infinity'));

const cases = [
  ...[...durations].map((v) => ['d', v, (x) => P.fmtPs(x)]),
  ...[...durations].map((v) => ['d', v, (x) => P.fmtPs(Number(x))]),
  ...means.map((v) => ['m', v, (x) => P.fmtPs(Number(x))]),
  ...fractions.map((v) => ['p', v, (x) => P.fmtPct(num(x))]),
  ...fractions.map((v) => ['h', v, (x) => P.fmtShare(num(x))]),
  ...changes.map((v) => ['r', v, (x) => P.fmtChange(num(x))]),
  ...rates.map((v) => ['f', v, (x) => P.fmtTflops(num(x))]),
  ...drifts.map((v) => ['ppm', v, (x) => P.fmtPpm(num(x))]),
  ...significant.map((v) => [
    'g',
    v,
    (x) => P.fmtSignificant(num(x.split(' ')[1]), Number(x.split(' ')[0])),
  ]),
  ...[...durations].map((v) => ['s', v, (x) => P.fmtSignedNs(x)]),
  ...[...durations].map((v) => ['s', v, (x) => P.fmtSignedNs(Number(x))]),
  ...[...durations].map((v) => ['t', v, (x) => P.fmtTime(x)]),
  ...[...durations].filter(safe).map((v) => ['t', v, (x) => P.fmtTime(Number(x))]),
  ...unsigned.map((v) => ['b', v, (x) => P.fmtBytes(x)]),
  ...unsigned.filter(safe).map((v) => ['b', v, (x) => P.fmtBytes(Number(x))]),
  ...[...durations].map((v) => ['n', v, (x) => P.fmtCount(x)]),
  ...[...durations].filter(safe).map((v) => ['n', v, (x) => P.fmtCount(Number(x))]),
  ...unsigned.map((v) => ['c', v, (x) => P.countOf(x, 'regression')]),
];
const run = spawnSync(casesBin, [], {
  input: cases.map(([k, v]) => `${k} ${v}\n`).join(''),
  encoding: 'utf8',
  maxBuffer: 64 << 20,
});
if (run.status !== 0) {
  console.error(`${casesBin} failed (${run.status ?? run.signal}): ${run.error || run.stderr}`);
  process.exit(1);
}
const want = run.stdout.split('\n');
let failures = 0;
cases.forEach(([kind, v, format], i) => {
  const got = format(v);
  if (got !== want[i] && failures++ < 20) {
    console.error(`FAIL ${kind} ${v}: app.js writes "${got}", the CLI "${want[i]}"`);
  }
});
// The page-only rules: fmtNs is fmtPs of ns * 1000, as the CLI's FormatDurationPs(ns * 1000),
// and fmtSpan a capture's length as CaptureDuration (cli/capture_rows.cc) writes it, "-" until
// it has a start and an end after it.
const own = [
  [P.fmtNs('45600'), '45.6 us'],
  [P.fmtNs(45600), '45.6 us'],
  [P.fmtNs('0'), '0 ps'],
  [P.fmtNs(-1), '-1.00 ns'],
  [P.fmtNs('999999'), '1.00 ms'],
  [P.fmtSpan(1000, 46600), '45.6 us'],
  [P.fmtSpan(0, 46600), '-'],
  [P.fmtSpan(1000, 1000), '-'],
  [P.fmtSpan(1000, 0), '-'],
];
// Each formatter's "-" for a figure the API left out.
for (const name of Object.keys(P).filter((k) => k.startsWith('fmt') && k !== 'fmtSpan')) {
  for (const none of [null, undefined, '']) own.push([P[name](none), '-', `${name}(${none})`]);
}
for (const none of [NaN, 'x']) own.push([P.fmtPs(none), '-'], [P.fmtNs(none), '-']);
own.forEach(([got, text, what], i) => {
  if (got !== text) {
    console.error(`FAIL ${what || `case ${i}`}: "${got}", want "${text}"`);
    failures++;
  }
});
if (failures > 0) {
  console.error(`format_test: ${failures} of ${cases.length + own.length} cases differ`);
  process.exit(1);
}
console.log(`format_test: app.js formats all ${cases.length} cases as the CLI does`);
