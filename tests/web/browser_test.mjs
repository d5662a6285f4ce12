// The web pages in a real browser: headless Chromium (Debian's) driven over the DevTools
// protocol by playwright-core (web/package-lock.json), against a `podprof demo --keep` pod.
// Checks what a user would look at: every page loads without console errors, the capture
// page lists its hosts and top kernels, the timeline canvas has kernel pixels where the data
// says kernels ran (and none where it says idle), its legend names the colours, its counter
// strip has a scale and its axis labels differ when zoomed in, a capture started from the page
// shows its progress live, and the kernel page shows the kernel-profiling breakdown (per chip,
// by scope and source line), its per-chip rows longest first with MXU and throttling, its
// 64-bit program id exactly, its HLO wrapped, and a history chart of one point per capture.
// Text is read from the DOM wherever the page writes it; pixels only where only the canvas
// knows. Screenshots go to --out.
//
//   node tests/web/browser_test.mjs --bin build/bin --out build/test-artifacts/web
// Exit: 0 all passed, 1 a check failed, 77 no browser here (skipped, and says so).
import {mkdirSync, readFileSync} from 'node:fs';
import {join} from 'node:path';

import {arg, check, failures, launchBrowser, startDemo} from './harness.mjs';
import {pageFormatting} from './page_formatting.mjs';

const out = arg('out', 'build/test-artifacts/web');
mkdirSync(out, {recursive: true});

// The demo pod: 2 hosts x 4 chips, one capture, left running for the pages.
const result = startDemo(2, 'podprof-web-');
const page0 = new URL(result.web_url);
const base = page0.origin;
const firstCapture = result.capture_id;
const stopPod = result.stop;
// A second pod for the kernel page's profiling breakdown: TPU v7x (the generation with kernel
// profiling), one capture with it. Stopped once its page is checked; its 20 MB per host of
// counter samples would slow the main pod's exports.
const profiled = startDemo(2, 'podprof-web-kp-', ['--generation', 'v7x', '--kernel-profiling']);
const profiledBase = new URL(profiled.web_url).origin;

const browser = await launchBrowser();
const page = await browser.newPage({viewport: {width: 1400, height: 1000}, deviceScaleFactor: 1});
const consoleErrors = [];
page.on('console', (m) => {
  if (m.type() === 'error') consoleErrors.push(`${page.url()}: ${m.text()}`);
});
page.on('pageerror', (e) => consoleErrors.push(`${page.url()}: ${e.message}`));
const requests = [];
page.on('requestfinished', async (r) => {
  const s = await r.sizes().catch(() => null);
  requests.push({url: r.url(), bytes: s ? s.responseBodySize + s.responseHeadersSize : 0});
});

async function open(path, origin = base) {
  await page.goto(origin + path);
  await page.waitForSelector('body[data-ready="true"]', {timeout: 30000});
  const error = await page.$eval(
    '#main',
    (m) => (m.querySelector('.error') || {}).textContent || '',
  );
  check(error === '', `${path} loads without an error on the page${error ? ': ' + error : ''}`);
}
const shot = (name) => page.screenshot({path: join(out, `${name}.png`), fullPage: true});

// The kernel page's history chart: its points, their pixels, and where they lie across the
// plot (0 left edge, 1 right edge).
const historyPoints = () =>
  page.evaluate(() => {
    const u = window.podprof.historyChart,
      n = u.data[0].length;
    const ctx = u.ctx,
      px = [],
      at = [];
    for (let i = 0; i < n; i++) {
      const x = u.valToPos(u.data[0][i], 'x', true),
        y = u.valToPos(u.data[1][i], 'y', true);
      px.push(Array.from(ctx.getImageData(Math.round(x), Math.round(y), 1, 1).data));
      at.push((x - u.bbox.left) / u.bbox.width);
    }
    return {n, px, at};
  });

// The pod page: the agents' telemetry as a step-time and a duty-cycle heatmap (a row per chip,
// a column per stored second), the snapshot button (the demo's HTTP is plaintext on loopback:
// an operator), and the snapshot it takes listed and marked in red where its window ends.
async function checkPodPage() {
  await page.waitForFunction(
    async () => (await (await fetch('/api/v1/telemetry?since=1m')).json()).telemetry.length >= 24,
    null,
    {timeout: 20000},
  );
  await open('/pod');
  const rows = async (id) =>
    page.$eval(`#${id}`, (c) => ({
      h: c.height,
      min: Number(c.dataset.min),
      max: Number(c.dataset.max),
      rows: Number(c.dataset.rows),
    }));
  const step = await rows('step-heatmap'),
    duty = await rows('duty-heatmap'),
    coll = await rows('collective-heatmap');
  check(
    step.min > 100 && step.max >= step.min && duty.min > 0 && duty.max <= 100,
    `the pod page draws step time (${step.min.toFixed(0)}-${step.max.toFixed(0)} us) and duty cycle (${duty.min.toFixed(1)}-${duty.max.toFixed(1)}%) per chip`,
  );
  // The collectives are the host's: a row per host, not per chip.
  const hosts = new Set(
    (await (await fetch(`${base}/api/v1/telemetry?since=1m`)).json()).telemetry.map((r) => r.host),
  );
  check(
    coll.rows === hosts.size && step.rows > coll.rows && coll.min > 0 && coll.max >= coll.min,
    `the pod page draws each of the ${hosts.size} hosts' collective time (${coll.min.toFixed(0)}-${coll.max.toFixed(0)} us) in a row of its own`,
  );
  await page.click('#snapshot-now');
  await page.waitForFunction(
    () => (document.getElementById('snapshot-message') || {}).textContent?.startsWith('snapshot'),
    null,
    {timeout: 20000},
  );
  const said = await page.$eval('#snapshot-message', (m) => m.textContent);
  const id = said.split(' ')[1];
  // The snapshot stored, the page reloads itself and lists it.
  await page.waitForFunction(
    async (c) => (await (await fetch(`/api/v1/captures/${c}`)).json()).status !== 'running',
    id,
    {timeout: 30000},
  );
  await open('/pod');
  const listed = await page.$eval('#snapshots', (l) => l.textContent);
  check(
    listed.includes(id) && listed.includes('manual') && listed.includes('from the pod page'),
    `the pod page's button took snapshot ${id} and lists it (${listed.slice(0, 80)})`,
  );
  // Its diff against a complete capture from before it.
  const diff = new URL(await page.$eval('#snapshots a.diff', (a) => a.getAttribute('href')), base)
    .searchParams;
  const baseline = await (await fetch(`${base}/api/v1/captures/${diff.get('baseline')}`)).json();
  const snapshot = await (await fetch(`${base}/api/v1/captures/${id}`)).json();
  check(
    diff.get('candidate') === id &&
      baseline.status === 'complete' &&
      baseline.source === 'capture' &&
      baseline.end_ns <= snapshot.start_ns,
    `the snapshot links to its diff against capture ${diff.get('baseline')}, complete before it`,
  );
  const red = await page.$eval('#step-heatmap', (c) => {
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 0; i < d.length; i += 4) if (d[i] > 200 && d[i + 1] < 40 && d[i + 2] < 40) n++;
    return n;
  });
  check(red > 0, `the snapshot is marked on the step-time heatmap (${red} red pixels)`);
  await shot('pod');
  // The demo arms no flight recorder: its snapshot holds the seconds after the request, and is
  // stored (its window covers its events) and shown as such, the host's note first (#53).
  for (let i = 0; i < 100; i++) {
    const c = await (await fetch(`${base}/api/v1/captures/${id}`)).json();
    if (c.status !== 'running') break;
    await new Promise((r) => setTimeout(r, 200));
  }
  await open(`/captures/${id}`);
  const banner = await page.$eval('#window-banner', (b) => b.textContent).catch(() => '');
  check(
    snapshot.window === 'after-request' && banner.includes('AFTER the request'),
    `the snapshot without a recorder says it holds the seconds after the request (${snapshot.window}: ${banner.slice(0, 60)})`,
  );
  const note = await page.$eval('#hosts tr:nth-child(2) td.notes', (t) => t.textContent);
  check(
    note.startsWith('no flight recorder armed'),
    `the host's note says why first (${note.slice(0, 60)})`,
  );
}

// The page's own rules for what it shows (web/src/app.js): a test that formatted the API's
// figures itself would check the page against a second copy of them. fmtShare: a measured
// share, 0 too (busy units, throttling, Utilization Viewer shares); fmtPct: "-" for 0 (the
// per-chip MXU column), as the CLI writes each.
const {fmtPct, fmtShare, fmtSignedNs, fmtChange} = pageFormatting();
// Longest total time first, as the page sorts the per-chip rows.
const byTime = (rows) =>
  [...rows].sort(
    (a, b) => b.total_ps - a.total_ps || a.host.localeCompare(b.host) || a.chip - b.chip,
  );

// The kernel page of the kernel-profiling capture, open: the breakdown per chip as the API
// has it (units busy, the power manager's throttling, XProf's Utilization Viewer rows over the
// pod and per die), the time inside by scope and source line, the
// per-chip table longest first with MXU and throttle columns, the program id to the last
// digit, the HLO wrapped.
async function checkKernelProfiling() {
  const path = `/kernels/flash_attention?capture=${profiled.capture_id}`;
  await open(path, profiledBase);
  const text = await (await fetch(`${profiledBase}/api/v1${path}`)).text();
  const k = JSON.parse(text);
  const shown = await page.evaluate(() => {
    const rows = (sel, die = false) =>
      [...document.querySelectorAll(`${sel} tr[data-host]${die ? '.die' : ':not(.die)'}`)].map(
        (r) => ({
          id: `${r.dataset.host}/${r.dataset.chip}`,
          die: r.dataset.die,
          cells: [...r.cells].map((c) => c.textContent),
        }),
      );
    const head = (sel) => [...document.querySelectorAll(`${sel} th`)].map((h) => h.textContent);
    return {
      profile: rows('#profile-chips'),
      dies: rows('#profile-chips', true),
      profileHead: head('#profile-chips'),
      perChip: rows('#per-chip'),
      perChipHead: head('#per-chip'),
      scopes: [...document.querySelectorAll('table.scopes')].map((t) => ({
        line: t.dataset.line,
        names: [...t.querySelectorAll('td.scope-name')].map((c) => c.textContent),
      })),
      pod: (document.getElementById('profile-pod') || {}).textContent || '',
      utilHead: head('#profile-rows'),
      util: [...document.querySelectorAll('#profile-rows tr[data-row]')].map((r) => ({
        name: r.dataset.row,
        pooled: r.querySelector('td[data-pooled]').textContent,
        dies: Object.fromEntries(
          [...r.querySelectorAll('td[data-die]')].map((c) => [c.dataset.die, c.textContent]),
        ),
      })),
      chipUtil: document.querySelectorAll('details.chip-utilization table.utilization').length,
      main: document.getElementById('main').textContent,
      overflow: [...document.querySelectorAll('pre')].map((p) => p.scrollWidth - p.clientWidth),
    };
  });
  const want = byTime(k.per_chip);
  const api = new Map(want.map((r) => [`${r.host}/${r.chip}`, r.insight.kernel_profile]));
  const col = (head, name) => head.indexOf(name);
  const mxuAt = col(shown.profileHead, 'MXU'),
    thrAt = col(shown.profileHead, 'Throttled');
  check(
    shown.profile.length === 8 &&
      mxuAt > 0 &&
      thrAt > 0 &&
      shown.profile.every(
        (r) =>
          api.get(r.id) &&
          r.cells[mxuAt] === fmtShare(api.get(r.id).units.mxu) &&
          r.cells[thrAt] === fmtShare(api.get(r.id).throttled),
      ),
    `kernel profiling per chip: ${shown.profile.length} chips' MXU and throttling as the API has them (${shown.profile.map((r) => r.cells[mxuAt])})`,
  );
  // Each v7x chip's two dies on rows of their own, with the API's per-die figures.
  const dieApi = (r) => (api.get(r.id).dies || []).find((d) => String(d.die) === r.die);
  check(
    shown.dies.length === 16 &&
      shown.dies.every(
        (r) =>
          dieApi(r) &&
          r.cells[mxuAt] === fmtShare(dieApi(r).units.mxu) &&
          r.cells[thrAt] === fmtShare(dieApi(r).throttled),
      ),
    `kernel profiling per die: ${shown.dies.length} die rows as the API has them`,
  );
  check(
    /units busy: MXU \d/.test(shown.pod) &&
      /power manager: \d+\.\d% of cycles skipped \(die 0 /.test(shown.pod) &&
      !/nominal/.test(shown.main),
    `the pod's units and the power manager's throttling are summed up, no nominal clock (${shown.pod})`,
  );
  // XProf's Utilization Viewer rows over the pod, pooled and each die's beside them, as the API
  // has them (share = achieved / peak).
  const podApi = k.rollup.insight.kernel_profile;
  const apiShare = (rows, name) => {
    const r = (rows || []).find((x) => x.name === name);
    return r ? fmtShare(r.peak > 0 ? r.achieved / r.peak : 0) : '-';
  };
  const mxuRow = shown.util.find((r) => r.name === 'Avg MXU Busy');
  check(
    mxuRow !== undefined &&
      podApi.dies.length === 2 &&
      shown.utilHead.includes('Die 1 Share') &&
      mxuRow.pooled === apiShare(podApi.rows, 'Avg MXU Busy') &&
      podApi.dies.every((d) => mxuRow.dies[String(d.die)] === apiShare(d.rows, 'Avg MXU Busy')) &&
      shown.util.length === podApi.rows.length,
    `the Utilization Viewer rows over the pod, per die (${shown.util.length} rows; Avg MXU Busy ${JSON.stringify(mxuRow)})`,
  );
  check(shown.chipUtil === 8, `each chip's Utilization Viewer rows (${shown.chipUtil} chips)`);
  const lines = [...new Set(k.scopes.map((sc) => sc.line))];
  const sourceLines = k.scopes.filter((sc) => sc.line === 'Source Lines').map((sc) => sc.name);
  const shownSource = (shown.scopes.find((t) => t.line === 'Source Lines') || {names: []}).names;
  check(
    JSON.stringify(shown.scopes.map((t) => t.line)) === JSON.stringify(lines) &&
      lines.includes('Pallas Primitives'),
    `the time inside by scope line (${shown.scopes.map((t) => `${t.line}: ${t.names.length}`).join(', ')})`,
  );
  check(
    sourceLines.length > 0 && JSON.stringify(shownSource) === JSON.stringify(sourceLines),
    `the source lines, longest first (${shownSource.join(', ')})`,
  );

  check(
    shown.perChip.length === 8 &&
      JSON.stringify(shown.perChip.map((r) => r.id)) ===
        JSON.stringify(want.map((r) => `${r.host}/${r.chip}`)),
    `the per-chip table is longest first (${shown.perChip.map((r) => r.id).join(' ')})`,
  );
  const mxu = col(shown.perChipHead, 'MXU'),
    thr = col(shown.perChipHead, 'Throttle');
  check(
    mxu > 0 &&
      thr > 0 &&
      shown.perChip.every(
        (r) =>
          r.cells[mxu] === fmtPct(api.get(r.id).units.mxu) &&
          r.cells[thr] === fmtShare(api.get(r.id).throttled),
      ),
    `the per-chip table has MXU and throttle columns (${shown.perChip[0].cells[mxu]}, ${shown.perChip[0].cells[thr]})`,
  );

  // The simulator's own record of the program id, read as text: JSON.parse would round it.
  const truth = readFileSync(join(profiled.dir, 'truth-0.json'), 'utf8').match(
    /"program_id":\s*(\d+)/,
  )[1];
  check(
    BigInt(truth) > 2n ** 53n &&
      text.includes(`"program_id":"${truth}"`) &&
      shown.main.includes(`program ${truth} `),
    `the 64-bit program id ${truth} is in the JSON as a string and on the page to the last digit`,
  );
  check(
    shown.overflow.length >= 2 && shown.overflow.every((o) => o <= 1),
    `the HLO and MLIR wrap inside their boxes (${shown.overflow} px past their right edges)`,
  );
  await shot('kernel-profiling');
  profiled.stop();
}

// The capture page, open: the timeline's legend names the colours of the kernels it draws and
// the other marks; the counter strip says its scale.
async function checkLegendAndScale() {
  const got = await page.evaluate(() => {
    const tl = window.podprof.timeline,
      scale = document.getElementById('counter-scale');
    let max = 0;
    for (const t of tl.data.tracks) {
      const pts = (t.counters || {})[tl.counter] || [];
      for (let i = 2; i < pts.length; i += 3) max = Math.max(max, pts[i]);
    }
    return {
      entries: [...document.querySelectorAll('#timeline-legend .legend-entry')].map((e) => {
        const sw = e.querySelector('.swatch');
        return {
          kernel: e.dataset.kernel,
          mark: e.dataset.mark,
          text: e.textContent,
          swatch: sw ? getComputedStyle(sw).backgroundColor : null,
          want: e.dataset.kernel ? window.podprof.kernelColor(e.dataset.kernel) : null,
        };
      }),
      names: tl.data.kernels.map((k) => k.name),
      counter: tl.counter,
      max,
      straggler: !!tl.straggler,
      scale: {
        text: scale.textContent,
        min: scale.dataset.min,
        max: Number(scale.dataset.max),
        shown: scale.offsetParent !== null,
      },
    };
  });
  const kernels = got.entries.filter((e) => e.kernel);
  check(
    kernels.length >= 5 &&
      kernels.every(
        (e) => got.names.includes(e.kernel) && e.text === e.kernel && e.swatch === e.want,
      ),
    `the legend gives ${kernels.length} kernels their colours (${kernels
      .slice(0, 3)
      .map((e) => `${e.kernel} ${e.swatch}`)
      .join(', ')}, ...)`,
  );
  const marks = got.entries.map((e) => e.mark).filter(Boolean);
  check(
    ['idle', 'counter', 'collective'].every((m) => marks.includes(m)) &&
      marks.includes('straggler') === got.straggler,
    `the legend says what the other marks mean (${marks})`,
  );
  check(
    got.counter &&
      got.max > 0 &&
      got.scale.max === got.max &&
      got.scale.min === '0' &&
      got.scale.shown &&
      /^strip 0 – \S+/.test(got.scale.text),
    `the ${got.counter} strip has its scale: "${got.scale.text}" (the highest value in view is ${got.max})`,
  );
}

// Zoomed in further, to about a millisecond in the middle of the capture: the axis's labels
// differ, where whole milliseconds would repeat ("518 ms" three times).
async function checkDistinctTicks() {
  for (let i = 0; i < 16; i++) await page.mouse.wheel(0, -100);
  await page.waitForFunction(
    () => {
      const tl = window.podprof.timeline,
        d = tl.data;
      return (
        tl.view.to - tl.view.from < 0.005 * tl.length &&
        d.from_ns === Math.floor(tl.view.from) &&
        d.to_ns === Math.ceil(tl.view.to)
      );
    },
    null,
    {timeout: 10000},
  );
  const axis = await page.evaluate(() =>
    window.podprof.timeline.axis.map((a) => [a.label, window.podprof.fmtNs(a.t)]),
  );
  const labels = axis.map((a) => a[0]),
    whole = axis.map((a) => a[1]);
  check(
    labels.length >= 3 &&
      new Set(labels).size === labels.length &&
      new Set(whole).size < whole.length,
    `zoomed to a millisecond, the axis labels differ (${labels.join(', ')}; in whole units: ${whole.join(', ')})`,
  );
  await shot('capture-ticks');
}

try {
  await checkKernelProfiling();

  // A kernel of the only capture so far: its lone history point in the middle of the chart.
  await open(`/kernels/flash_attention?capture=${firstCapture}`);
  const lone = await historyPoints();
  check(
    lone.n === 1 && lone.at[0] > 0.3 && lone.at[0] < 0.7 && lone.px[0][3] > 0,
    `one capture's history point is drawn mid-chart (${lone.n} point at ${lone.at.map((f) => f.toFixed(2))})`,
  );

  // Captures, and one started from the page with its progress followed live.
  await open('/');
  check(
    (await page.$(`tr[data-capture="${firstCapture}"]`)) !== null,
    'the captures page lists the demo capture',
  );
  await page.fill('#start-form input[name=duration]', '3s');
  await page.fill('#start-form input[name=labels]', 'from=browser');
  await page.click('#start-form button');
  await page.waitForFunction(() =>
    /started (cap-\S+)/.test(document.getElementById('start-message').textContent),
  );
  const second = (await page.textContent('#start-message')).match(/started (cap-\S+)/)[1];
  const row = `tr[data-capture="${second}"]`;
  await page.waitForSelector(`${row} .progress`, {timeout: 10000});
  const seen = new Set();
  let midShot = false;
  for (let i = 0; i < 300; i++) {
    const state = await page
      .$eval(row, (r) => [r.dataset.percent, r.querySelector('.state').textContent])
      .catch(() => null);
    if (state && state[0] !== undefined) seen.add(state[0]);
    if (!midShot && state && Number(state[0]) > 0 && Number(state[0]) < 100) {
      await shot('captures-live');
      midShot = true;
    }
    if (state && state[1] === 'complete') break;
    await page.waitForTimeout(100);
  }
  check(
    seen.size >= 3,
    `a running capture's progress updates live (${seen.size} distinct percentages seen)`,
  );
  await page.waitForFunction(
    (sel) => {
      const r = document.querySelector(sel);
      return r && r.querySelector('.state').textContent === 'complete';
    },
    row,
    {timeout: 30000},
  );
  check(true, `the capture started from the page completes (${second})`);
  await shot('captures');

  // One capture: hosts, top kernels, timeline, heatmap.
  const before = requests.length;
  const t0 = Date.now();
  await open(`/captures/${firstCapture}`);
  const hosts = await page.$$eval('#hosts tr', (rows) =>
    rows.slice(1).map((r) => r.cells[0].textContent),
  );
  check(
    JSON.stringify(hosts) === '["host-0","host-1"]',
    `the capture page lists its hosts (${hosts})`,
  );
  // Each host's clock correction and its bound as `podprof capture` writes them.
  const clocks = await page.$$eval('#hosts tr', (rows) =>
    rows.slice(1).map((r) => [r.cells[2].textContent, r.cells[3].textContent]),
  );
  const apiHosts = (await (await fetch(`${base}/api/v1/captures/${firstCapture}`)).json())
    .hosts_detail;
  check(
    clocks.length === apiHosts.length &&
      apiHosts.every(
        (h, i) =>
          h.status === 'complete' &&
          clocks[i][0] === fmtSignedNs(h.clock_offset_ns) &&
          clocks[i][1] === fmtSignedNs(h.clock_uncertainty_ns),
      ),
    `the hosts' clock corrections as the CLI writes them (${clocks.map((c) => c.join(' ± ')).join(', ')})`,
  );
  const kernels = await page.$$eval('#kernels tr', (rows) =>
    rows.slice(1).map((r) => r.cells[0].textContent),
  );
  const apiTop = await (
    await fetch(`${base}/api/v1/captures/${firstCapture}/kernels?top=15`)
  ).json();
  check(
    kernels.length === 15 && kernels[0] === apiTop.rows[0].kernel,
    `the capture page shows the top kernels as the API ranks them (${kernels.slice(0, 3)}...)`,
  );
  await page.waitForFunction(() => window.podprof.timeline && window.podprof.timeline.data);
  console.log(
    `     capture page ready in ${Date.now() - t0} ms, ${requests.slice(before).reduce((a, r) => a + r.bytes, 0)} bytes`,
  );

  // Kernel pixels where the data has kernels (slices, or pixels they partly fill), background
  // where it has none: sampled on each track's bottom line, which any busy pixel reaches.
  const samplePixels = () =>
    page.evaluate(() => {
      const tl = window.podprof.timeline,
        d = tl.data,
        {ROW_H, LABEL_W} = window.podprof.TIMELINE_LAYOUT;
      const ctx = tl.canvas.getContext('2d'),
        width = tl.plotWidth();
      const at = (px, y) => Array.from(ctx.getImageData(LABEL_W + px, y, 1, 1).data.slice(0, 3));
      const busy = [],
        idle = [];
      d.tracks.forEach((t, i) => {
        // `covered`: any part of the pixel has a kernel; `full`: all of it (a slice's edge pixel
        // can be covered so little that, antialiased, it rounds to the background's colour).
        const covered = new Uint8Array(width + 2),
          full = new Uint8Array(width + 2);
        for (let k = 0; k < t.bins.length; k += 3) covered[t.bins[k] + 1] = full[t.bins[k] + 1] = 1;
        for (let k = 0; k < t.slices.length; k += 4) {
          const s = t.slices[k] / d.ns_per_px,
            e = (t.slices[k] + t.slices[k + 1]) / d.ns_per_px;
          for (let px = Math.max(0, Math.floor(s)); px <= Math.min(width - 1, Math.ceil(e)); px++)
            covered[px + 1] = 1;
          for (
            let px = Math.max(0, Math.ceil(s));
            px <= Math.min(width - 1, Math.floor(e) - 1);
            px++
          )
            full[px + 1] = 1;
        }
        const y = tl.trackY(i) + ROW_H - 1;
        for (let px = 0; px < width; px += 3) {
          if (full[px + 1] && (t.bins.length === 0 || (full[px] && full[px + 2])))
            busy.push(at(px, y));
          if (!covered[px] && !covered[px + 1] && !covered[px + 2]) idle.push(at(px, y));
        }
      });
      return {busy, idle, tracks: d.tracks.length};
    });
  const bg = JSON.stringify([243, 244, 247]);
  const isBg = (p) => JSON.stringify(p) === bg;
  const whole = await samplePixels();
  check(whole.tracks === 8, `the timeline has a track per chip (${whole.tracks})`);
  check(
    whole.busy.length > 500 && whole.busy.every((p) => !isBg(p)),
    `whole capture: ${whole.busy.length} sampled busy pixels are drawn in kernel colours`,
  );
  // (The whole capture of the demo has no idle pixel to sample: the zoomed view below checks
  // that idle time is drawn as background.)
  // The demo injects no straggler: the page names none (a ranking's first row is not one).
  const verdict = await page.textContent('#straggler-verdict');
  check(
    /^No clear straggler: /.test(verdict) &&
      !(await page.$eval('#main', (m) => m.textContent.includes('Straggler:'))),
    `no straggler is named on a pod without one (${verdict})`,
  );
  await checkLegendAndScale();
  check(
    /^2 of 2 agents online$/.test(await page.textContent('#agents')),
    `the header counts the agents (${await page.textContent('#agents')})`,
  );
  await shot('capture');

  // Zoom in on the canvas: the next window comes back at slice level.
  const box = await (await page.$('#timeline-canvas')).boundingBox();
  await page.mouse.move(box.x + box.width / 2, box.y + 60);
  for (let i = 0; i < 14; i++) await page.mouse.wheel(0, -100);
  // Waits for the data of the window in view: wheel events spaced past the load's debounce
  // fetch windows on the way in, and the canvas draws the view, not the data's window.
  await page.waitForFunction(
    () => {
      const tl = window.podprof.timeline,
        d = tl.data;
      return (
        d.to_ns - d.from_ns < 0.1 * tl.length &&
        d.from_ns === Math.floor(tl.view.from) &&
        d.to_ns === Math.ceil(tl.view.to)
      );
    },
    null,
    {timeout: 10000},
  );
  const zoomed = await samplePixels();
  const slices = await page.evaluate(() =>
    window.podprof.timeline.data.tracks.reduce((n, t) => n + t.slices.length / 4, 0),
  );
  check(slices > 0, `zoomed in, the window comes back at slice level (${slices} slices)`);
  check(
    zoomed.busy.length > 100 && zoomed.busy.every((p) => !isBg(p)),
    `zoomed: ${zoomed.busy.length} sampled busy pixels are drawn in kernel colours`,
  );
  check(
    zoomed.idle.length > 50 && zoomed.idle.every(isBg),
    `zoomed: ${zoomed.idle.length} sampled idle pixels are background`,
  );
  await shot('capture-zoomed');
  await checkDistinctTicks();
  // "Open in Perfetto": the trace goes to the Perfetto UI by its postMessage handshake. A
  // stand-in for ui.perfetto.dev answers PING with PONG and keeps what it is sent.
  await page.context().route('https://ui.perfetto.dev/**', (route) =>
    route.fulfill({
      contentType: 'text/html',
      body: `<script>window.addEventListener('message', (e) => {
      if (e.data === 'PING') { e.source.postMessage('PONG', '*'); return; }
      if (e.data && e.data.perfetto) document.title = 'got ' + e.data.perfetto.buffer.byteLength + ' ' + e.data.perfetto.title;
    });</script>`,
    }),
  );
  const [popup] = await Promise.all([
    page.waitForEvent('popup'),
    page.click('text=Open in Perfetto'),
  ]);
  await popup.waitForFunction(() => document.title.startsWith('got '), null, {timeout: 20000});
  const exported = (
    await (
      await fetch(`${base}/api/v1/captures/${firstCapture}/export?format=perfetto`)
    ).arrayBuffer()
  ).byteLength;
  const title = await popup.title();
  check(
    title === `got ${exported} ${firstCapture}`,
    `Open in Perfetto hands the UI the whole trace (${title}; the export is ${exported} bytes)`,
  );
  await popup.close();
  const heat = await page.evaluate(() => window.podprof.heatmap.data);
  check(
    heat.chips.length === 8 && heat.steps.length > 0 && heat.wait_ns.flat().some((v) => v > 0),
    `the waits heatmap has 8 chips x ${heat.steps.length} steps with waits in it`,
  );

  // The kernel page: texts, per-chip rows, history with one point per capture.
  await open(`/kernels/flash_attention?capture=${second}`);
  check(
    await page.$eval('#main', (m) => m.textContent.includes('tpu_custom_call')),
    'the kernel page shows the HLO',
  );
  const perChip = await page.$$eval('#per-chip tr', (r) => r.length - 1);
  check(perChip === 8, `the kernel page has a row per chip (${perChip})`);
  check(
    (await page.$('#profile-none')) !== null,
    'without kernel profiling the kernel page says how to get it',
  );
  const drawn = await historyPoints();
  check(drawn.n === 2, `the history chart has one point per capture (${drawn.n} for 2 captures)`);
  check(
    drawn.px.every((p) => p[3] > 0),
    'each history point is drawn on the chart',
  );
  check(
    drawn.at.every((f) => f > 0.02 && f < 0.98),
    `the history points lie inside the plot, not on its edges (${drawn.at.map((f) => f.toFixed(2))})`,
  );
  await shot('kernel');

  await open(`/diff?baseline=${firstCapture}&candidate=${second}`);
  const diffRows = await page.$$eval('#diff tr', (r) => r.length - 1);
  check(diffRows > 10, `the diff page compares the kernels of two captures (${diffRows} rows)`);
  // Each Δmean as `podprof diff` writes it, "new" and "gone" for a side that is absent.
  const deltas = (
    await (
      await fetch(`${base}/api/v1/diff?baseline=${firstCapture}&candidate=${second}&threshold=0.05`)
    ).json()
  ).deltas;
  const shownDelta = await page.$$eval('#diff tr', (rows) =>
    rows.slice(1).map((r) => r.cells[4].textContent),
  );
  const wantDelta = deltas.map((d) =>
    !d.baseline ? 'new' : !d.candidate ? 'gone' : fmtChange(d.mean_change),
  );
  check(
    JSON.stringify(shownDelta) === JSON.stringify(wantDelta),
    `the diff's Δmean as the CLI writes it (${shownDelta.slice(0, 3)}...)`,
  );
  await shot('diff');
  await checkPodPage();

  check(
    consoleErrors.length === 0,
    `no console errors${consoleErrors.length ? ':\n  ' + consoleErrors.join('\n  ') : ''}`,
  );
} catch (err) {
  check(false, `unexpected: ${err.stack || err}`);
  await shot('failure').catch(() => {});
} finally {
  await browser.close();
  stopPod();
  profiled.stop();
}
console.log(
  failures()
    ? `${failures()} checks failed; screenshots in ${out}`
    : `all passed; screenshots in ${out}`,
);
process.exit(failures() ? 1 : 0);
