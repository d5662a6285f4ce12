// The capture page's slice view (#56) in headless Chromium, on stored multi-slice captures
// served by a real podprof-aggregator (podprof-test-dcn-store: tests/util/dcn_pod.h's two
// slices of two chips over 20 steps of one rendezvous): "dcn-slow", whose link 0 -> 1 is
// 400 us slow, shows the verdict above a 2 x 20 grid with slice 1's row (the slow link's
// receivers) marked in red, coloured by the receivers' wait (slice 1's cells darker), and the
// link 0 -> 1 marked in the links table; "dcn-1", whose slice 1 is 300 us late, marks slice 1
// as the late producer and no link, coloured by the producers' own lateness; "no-dcn" shows
// nothing extra. The figures compared are the API's (/dcn?cells=1), read from the DOM and the
// canvas's pixels.
//
//   node tests/web/slice_view_test.mjs --bin build/bin --out build/test-artifacts/web
// Exit: 0 all passed, 1 a check failed, 77 no browser here (skipped, and says so).
import {spawn, spawnSync} from 'node:child_process';
import {mkdirSync, mkdtempSync, readFileSync} from 'node:fs';
import {tmpdir} from 'node:os';
import {join} from 'node:path';

import {arg, bin, check, failures, launchBrowser, waitForFile} from './harness.mjs';

const out = arg('out', 'build/test-artifacts/web');
mkdirSync(out, {recursive: true});
const dir = mkdtempSync(join(tmpdir(), 'podprof-web-slices-'));

const store = spawnSync(`${bin}/podprof-test-dcn-store`, [join(dir, 'pod.db')], {
  encoding: 'utf8',
});
if (store.status !== 0) {
  console.log(`FAIL podprof-test-dcn-store exited ${store.status}:\n${store.stderr}`);
  process.exit(1);
}
const ready = join(dir, 'aggregator.json');
const agg = spawn(
  `${bin}/podprof-aggregator`,
  [
    '--insecure',
    '--listen=127.0.0.1:0',
    '--http-listen=127.0.0.1:0',
    `--db=${join(dir, 'pod.db')}`,
    `--ready-file=${ready}`,
  ],
  {stdio: 'ignore'},
);
process.on('exit', () => agg.kill('SIGTERM'));
if (!(await waitForFile(ready, 30000))) {
  console.log('FAIL the aggregator did not become ready in 30 s');
  process.exit(1);
}
const origin = `http://127.0.0.1:${JSON.parse(readFileSync(ready, 'utf8')).http_port}`;
const dcnOf = async (id) => (await fetch(`${origin}/api/v1/captures/${id}/dcn?cells=1`)).json();

const browser = await launchBrowser();
const page = await browser.newPage({viewport: {width: 1400, height: 1000}, deviceScaleFactor: 1});
const consoleErrors = [];
page.on('pageerror', (e) => consoleErrors.push(e.message));
page.on('console', (m) => m.type() === 'error' && consoleErrors.push(m.text()));

async function open(id) {
  await page.goto(`${origin}/captures/${id}`);
  await page.waitForSelector('body[data-ready="true"]', {timeout: 30000});
}

// What the page drew: the grid's attributes, the verdict, the marked links, and per slice row
// the pixel of its outline (left edge, inside the row) and of its first cell's middle.
const drawn = () =>
  page.evaluate(() => {
    const c = document.getElementById('slice-grid');
    const verdict = document.getElementById('dcn-verdict');
    const links = [...document.querySelectorAll('#dcn-links tr.culprit')].map(
      (tr) => tr.dataset.link,
    );
    if (!c) return {grid: false, verdict: verdict && verdict.textContent, links};
    const {LABEL_W, AXIS_H} = window.podprof.canvas;
    const {h, w} = window.podprof.sliceView.cell();
    const ctx = c.getContext('2d');
    const px = (x, y) => [...ctx.getImageData(Math.round(x), Math.round(y), 1, 1).data];
    const rows = [];
    for (let i = 0; i < Number(c.dataset.slices); i++) {
      const y = AXIS_H + i * h;
      rows.push({outline: px(LABEL_W + 1, y + h / 2), cell: px(LABEL_W + w / 2, y + h / 2)});
    }
    return {
      grid: true,
      slices: Number(c.dataset.slices),
      instances: Number(c.dataset.instances),
      marked: c.dataset.marked,
      mode: c.dataset.mode,
      verdict: verdict.textContent,
      named: verdict.classList.contains('straggler'),
      links,
      rows,
    };
  });
const red = ([r, g, b]) => r === 192 && g === 57 && b === 43; // slice_view.js's MARK
const capital = (s) => s.charAt(0).toUpperCase() + s.slice(1);

try {
  // The slow link: slice 1's receivers wait; the link is named, slice 1's row marked.
  const slow = await dcnOf('dcn-slow');
  await open('dcn-slow');
  let d = await drawn();
  check(d.grid, 'dcn-slow: the slice grid is drawn');
  check(
    d.slices === slow.cells.slices.length &&
      d.slices === 2 &&
      d.instances === slow.cells.instances.length &&
      d.instances === 20,
    `dcn-slow: the grid is 2 slices x 20 instances, as the API's cells (${d.slices} x ${d.instances})`,
  );
  check(
    d.verdict === capital(slow.verdict) && d.named && /link slice 0 -> slice 1/.test(d.verdict),
    `dcn-slow: the verdict above names the link 0 -> 1 (${d.verdict})`,
  );
  check(
    d.links.length === 1 && d.links[0] === '0->1',
    `dcn-slow: the links table marks 0->1 alone (${d.links})`,
  );
  check(
    d.marked === '1' && red(d.rows[1].outline) && !red(d.rows[0].outline),
    `dcn-slow: slice 1's row (the slow link's receivers) is outlined in red, slice 0's not ` +
      `(marked ${d.marked}; ${d.rows.map((r) => r.outline.slice(0, 3)).join(' | ')})`,
  );
  check(
    d.mode === 'wait' && d.rows[1].cell[1] < d.rows[0].cell[1],
    `dcn-slow: coloured by the receivers' wait, slice 1's first cell darker than slice 0's ` +
      `(${d.rows[1].cell.slice(0, 3)} vs ${d.rows[0].cell.slice(0, 3)})`,
  );
  await page.screenshot({path: join(out, 'slice-view-slow-link.png'), fullPage: true});

  // The late slice: named as the producer, its row marked, no link.
  const late = await dcnOf('dcn-1');
  await open('dcn-1');
  d = await drawn();
  check(
    d.grid && d.slices === 2 && d.instances === late.cells.instances.length,
    `dcn-1: a 2-slice grid of the API's ${late.cells.instances.length} instances`,
  );
  check(
    d.marked === '1' && d.mode === 'producer' && red(d.rows[1].outline) && !red(d.rows[0].outline),
    `dcn-1: slice 1 is marked as the late producer, coloured by the producers' own lateness ` +
      `(marked ${d.marked}, mode ${d.mode})`,
  );
  check(d.links.length === 0, `dcn-1: no link is marked (${d.links})`);
  check(
    /^Slice 1 is the late producer/.test(d.verdict),
    `dcn-1: the verdict names slice 1 (${d.verdict})`,
  );
  // The other colouring, asked for: the receivers' wait (slice 0 waits for slice 1's data).
  await page.click('input[name="slice-mode"][value="wait"]');
  d = await drawn();
  check(
    d.mode === 'wait' && d.rows[0].cell[1] < d.rows[1].cell[1],
    `dcn-1: by the receivers' wait, slice 0's cells are the darker ` +
      `(${d.rows[0].cell.slice(0, 3)} vs ${d.rows[1].cell.slice(0, 3)})`,
  );
  await page.screenshot({path: join(out, 'slice-view-late-slice.png'), fullPage: true});

  // No cross-slice transfers: nothing extra.
  await open('no-dcn');
  const extra = await page.evaluate(() => ({
    children: document.getElementById('slices').children.length,
    heading: [...document.querySelectorAll('h2')].some((h) => /DCN/.test(h.textContent)),
  }));
  check(
    extra.children === 0 && !extra.heading,
    `no-dcn: no slice view (${extra.children} elements)`,
  );
  check(consoleErrors.length === 0, `no console errors (${consoleErrors.join('; ')})`);
} finally {
  await browser.close();
}
console.log(failures() ? `${failures()} checks failed` : 'all checks passed');
process.exit(failures() ? 1 : 0);
