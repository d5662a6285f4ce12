// The pages' number formatting (web/src/app.js: fmtPs, fmtNs, fmtPct) against the CLI's own
// (FormatDurationPs, report::FormatMeanPs, report::Percent), string for string: every case goes
// through tests/web/format_cases.cc, the C++ functions themselves, and app.js, loaded in a bare
// context (no browser). Label unit, through ctest:
//   node tests/web/format_test.mjs --cases build/tests/web_format_cases
import {spawnSync} from 'node:child_process';
import {readFileSync} from 'node:fs';
import path from 'node:path';
import {fileURLToPath} from 'node:url';
import vm from 'node:vm';

const argv = process.argv.slice(2);
const casesAt = argv.indexOf('--cases');
if (casesAt < 0 || !argv[casesAt + 1]) {
  console.error('usage: format_test.mjs --cases PATH/web_format_cases');
  process.exit(2);
}
const casesBin = argv[casesAt + 1];
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

// app.js needs a window to hang podprof on and to listen for DOMContentLoaded, nothing else
// until a page draws.
const window = {addEventListener: () => {}};
vm.runInNewContext(readFileSync(path.join(root, 'web/src/app.js'), 'utf8'), {window});
const P = window.podprof;

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
// Means (fractional ps) and fractions (Percent: positive ones; the pages write 0 as "0.0%"
// where the CLI writes "-", so 0 and below are not compared).
const means = ['0.4', '0.5', '1.5', '2.5', '-2.5', '999.5', '45649.5', '1234.567', '1e15'];
for (let i = 0; i < 500; i++) means.push(String(10 ** (random() * 12)));
const fractions = ['0.00125', '0.125', '0.5', '1', '0.0005', '0.0015', '0.00025', '0.99999'];
for (let i = 0; i < 500; i++) fractions.push(String(random()));

const cases = [
  ...[...durations].map((v) => ['d', v, (x) => P.fmtPs(x)]),
  ...[...durations].map((v) => ['d', v, (x) => P.fmtPs(Number(x))]),
  ...means.map((v) => ['m', v, (x) => P.fmtPs(Number(x))]),
  ...fractions.map((v) => ['p', v, (x) => P.fmtPct(Number(x))]),
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
// fmtNs is fmtPs of ns * 1000, as the CLI's FormatDurationPs(ns * 1000).
const ns = [
  ['45600', '45.6 us'],
  ['0', '0 ps'],
  ['-1', '-1.00 ns'],
  ['999999', '1.00 ms'],
];
for (const [v, text] of ns) {
  if (P.fmtNs(v) !== text || P.fmtNs(Number(v)) !== text) {
    console.error(`FAIL fmtNs(${v}): "${P.fmtNs(v)}", want "${text}"`);
    failures++;
  }
}
for (const none of [null, undefined, NaN, '', 'x']) {
  if (P.fmtPs(none) !== '-' || P.fmtNs(none) !== '-') {
    console.error(
      `FAIL ${String(none)}: fmtPs "${P.fmtPs(none)}", fmtNs "${P.fmtNs(none)}"; want "-"`,
    );
    failures++;
  }
}
if (failures > 0) {
  console.error(`format_test: ${failures} of ${cases.length + ns.length + 5} cases differ`);
  process.exit(1);
}
console.log(`format_test: app.js formats all ${cases.length} cases as the CLI does`);
