// The kernel page leads with its answer: in headless Chromium, at a laptop's viewport, the
// verdict, the hottest source line and Pallas primitive and the worst chip are on the first
// screen, as the JSON API has them, while XProf's Utilization Viewer rows and the per-chip and
// per-die tables are folded below in a closed <details> that opens on a click. The pod is a
// `podprof demo --keep` of 2 TPU v7x hosts with kernel profiling, host-1 chip 0 throttled, so
// the kernel `paged_attention` waits on HBM in one source line and one chip is the worst.
//
//   node tests/web/kernel_page_test.mjs --bin build/bin --out build/test-artifacts/web
// Exit: 0 all passed, 1 a check failed, 77 no browser here (skipped, and says so).
import {mkdirSync} from 'node:fs';
import {join} from 'node:path';

import {arg, check, failures, launchBrowser, startDemo} from './harness.mjs';
import {pageFormatting} from './page_formatting.mjs';

const out = arg('out', 'build/test-artifacts/web');
mkdirSync(out, {recursive: true});
const {fmtShare} = pageFormatting();

const pod = startDemo(2, 'podprof-web-kernel-', [
  '--generation',
  'v7x',
  '--kernel-profiling',
  '--throttle',
  '1:0:0.3',
]);
const origin = new URL(pod.web_url).origin;
const path = `/kernels/paged_attention?capture=${pod.capture_id}`;
const k = await (await fetch(`${origin}/api/v1${path}`)).json();

// What the page must lead with, from the API: the verdict, the longest source line and Pallas
// primitive (the scopes come longest first) with their share of the kernel's time, and the
// chip that spent the most time in the kernel.
const total = k.rollup.total_ps;
const hottest = (line) => k.scopes.find((sc) => sc.line === line);
const source = hottest('Source Lines');
const primitive = hottest('Pallas Primitives');
const worst = [...k.per_chip].sort((a, b) => b.total_ps - a.total_ps)[0];

// A laptop's screen: what is above its fold is what a user sees without scrolling.
const viewport = {width: 1280, height: 800};
const browser = await launchBrowser();
const page = await browser.newPage({viewport, deviceScaleFactor: 1});
const consoleErrors = [];
page.on('pageerror', (e) => consoleErrors.push(e.message));
page.on('console', (m) => m.type() === 'error' && consoleErrors.push(m.text()));

// Where `sel`'s first element whose text is `text` (any, when text is null) lies: its box
// relative to the top of the page, and whether it is drawn at all (not when hidden, or inside
// a closed <details>).
const box = (sel, text = null) =>
  page.evaluate(
    ([sel, text]) => {
      const e = [...document.querySelectorAll(sel)].find(
        (x) => text === null || x.textContent.trim() === text,
      );
      if (!e) return {found: false};
      const r = e.getBoundingClientRect();
      // checkVisibility: a closed <details> keeps its content's layout boxes, unrendered.
      const drawn = r.width > 0 && r.height > 0 && e.checkVisibility();
      return {found: true, drawn, top: r.top + scrollY, bottom: r.bottom + scrollY};
    },
    [sel, text],
  );
const aboveFold = (b) => b.found && b.drawn && b.top >= 0 && b.bottom <= viewport.height;
const where = (b) => (b.found ? (b.drawn ? `${b.top}-${b.bottom} px` : 'not drawn') : 'absent');

try {
  check(
    source && source.name === 'paged_attention.py:21' && primitive && primitive.name === 'dma_wait',
    `the API names the hot source line and primitive (${source && source.name}, ${primitive && primitive.name})`,
  );
  check(
    worst.host === 'host-1' && worst.chip === 0,
    `the throttled chip is the kernel's worst (${worst.host} chip ${worst.chip})`,
  );
  await page.goto(origin + path);
  await page.waitForSelector('body[data-ready="true"]', {timeout: 30000});

  const verdict = k.rollup.insight.verdict_text;
  const v = await box('#main *', verdict);
  check(aboveFold(v), `the verdict "${verdict}" is above the fold (${where(v)})`);

  // The hot source line and primitive: the first rows naming them, with their share as the
  // API's figures give it.
  const share = (sc) => fmtShare(sc.total_ps / total);
  for (const sc of [source, primitive]) {
    const at = await box('#main td', sc.name);
    const row = await page.evaluate((name) => {
      const td = [...document.querySelectorAll('#main td')].find(
        (x) => x.textContent.trim() === name,
      );
      return td ? [...td.parentElement.cells].map((c) => c.textContent.trim()) : [];
    }, sc.name);
    check(
      aboveFold(at) && row.includes(share(sc)),
      `${sc.line} ${sc.name} (${share(sc)} of the kernel's time) is above the fold (${where(at)}; row ${row.join(' | ')})`,
    );
  }

  // The worst chip: a row naming its host and chip, above the fold, with its verdict (which
  // says it is throttled).
  const chip = await page.evaluate(
    ([host, chip]) => {
      const r = document.querySelector(`#worst-chips tr[data-host="${host}"][data-chip="${chip}"]`);
      if (!r) return {found: false};
      const b = r.getBoundingClientRect();
      return {
        found: true,
        drawn: b.height > 0 && r.checkVisibility(),
        top: b.top + scrollY,
        bottom: b.bottom + scrollY,
        text: r.textContent,
      };
    },
    [worst.host, String(worst.chip)],
  );
  check(
    aboveFold(chip) && /throttled/.test(chip.text),
    `the worst chip, ${worst.host} chip ${worst.chip}, throttled, is above the fold (${where(chip)})`,
  );

  // The full tables are on the page, folded: a closed <details> holds them.
  const folded = await page.evaluate(() =>
    ['#profile-rows', '#profile-chips', 'table.scopes'].map((sel) => {
      const e = document.querySelector(sel);
      const d = e && e.closest('details');
      return {sel, found: !!e, folded: !!d && !d.open, id: d ? d.id : ''};
    }),
  );
  check(
    folded.every((f) => f.found && f.folded && f.id === 'kernel-tables'),
    `the utilisation, per-chip and scope tables are folded in a closed details#kernel-tables (${JSON.stringify(folded)})`,
  );
  for (const sel of ['#profile-rows', '#profile-chips']) {
    const b = await box(sel);
    check(b.found && !b.drawn, `${sel} is not drawn while folded (${where(b)})`);
  }
  await page.screenshot({path: join(out, 'kernel-lead.png')});

  // One click on its summary unfolds them, full: XProf's rows over the pod, a row per chip.
  await page.click('#kernel-tables > summary');
  const rows = await box('#profile-rows');
  const utilRows = await page.$$eval('#profile-rows tr[data-row]', (r) => r.length);
  check(
    rows.drawn && utilRows === k.rollup.insight.kernel_profile.rows.length,
    `a click unfolds the tables: ${utilRows} Utilization Viewer rows drawn (${where(rows)})`,
  );
  check(consoleErrors.length === 0, `no console errors ${consoleErrors.join('; ')}`);
} catch (err) {
  check(false, `unexpected: ${err.stack || err}`);
} finally {
  await page.screenshot({path: join(out, 'kernel-lead-full.png'), fullPage: true}).catch(() => {});
  await browser.close();
  pod.stop();
}
console.log(failures() ? `${failures()} checks failed` : 'all passed');
process.exit(failures() ? 1 : 0);
