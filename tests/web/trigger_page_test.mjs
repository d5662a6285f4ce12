// A triggered snapshot's capture page says why it was taken (#53): in headless Chromium, the
// trigger's reason as a sentence and a small chart of the recent seconds against the baseline
// and the threshold that fired, where the page used to print the evidence's JSON among the
// labels. The pod is `podprof demo --recorder --keep`: 4 v5p hosts, a chip of host-2 turning
// 1.6x slower 15 s in, and the snapshot the aggregator's step-time trigger takes of it.
//
//   node tests/web/trigger_page_test.mjs --bin build/bin --out build/test-artifacts/web
// Exit: 0 all passed, 1 a check failed, 77 no browser here (skipped, and says so).
import {mkdirSync} from 'node:fs';
import {join} from 'node:path';

import {arg, check, failures, launchBrowser, startDemo} from './harness.mjs';

const out = arg('out', 'build/test-artifacts/web');
mkdirSync(out, {recursive: true});

const pod = startDemo(4, 'podprof-web-trigger-', ['--recorder', '--scenario', 'straggler']);
const origin = new URL(pod.web_url).origin;
const c = await (await fetch(`${origin}/api/v1/captures/${pod.snapshot_id}`)).json();
const evidence = JSON.parse(c.labels.telemetry);

const browser = await launchBrowser();
const page = await browser.newPage({viewport: {width: 1400, height: 900}, deviceScaleFactor: 1});
const consoleErrors = [];
page.on('pageerror', (e) => consoleErrors.push(e.message));
try {
  await page.goto(pod.web_url);
  await page.waitForSelector('body[data-ready="true"]', {timeout: 30000});
  const reason = await page.$eval('#trigger-reason', (e) => e.textContent).catch(() => '');
  check(
    reason === c.labels.reason && reason.length > 0,
    `the page says the trigger's reason as a sentence (${reason})`,
  );
  const head = await page.$eval('#main h1 + div', (e) => e.textContent);
  check(
    !head.includes('{') && !head.includes('telemetry='),
    `the labels line holds no JSON evidence (${head.slice(0, 120)})`,
  );
  // The chart: a point per recent second, the baseline and the threshold as the evidence has
  // them (the step-time trigger's: ms, the baseline times the threshold ratio).
  const chart = await page
    .$eval('#trigger-chart', (svg) => ({
      points: svg.querySelector('polyline.series').getAttribute('points').trim().split(/\s+/)
        .length,
      base: Number(svg.querySelector('line.baseline').dataset.value),
      limit: Number(svg.querySelector('line.threshold').dataset.value),
      limitY: Number(svg.querySelector('line.threshold').getAttribute('y1')),
      lastY: Number(
        svg
          .querySelector('polyline.series')
          .getAttribute('points')
          .trim()
          .split(/\s+/)
          .pop()
          .split(',')[1],
      ),
    }))
    .catch(() => null);
  check(chart !== null, 'the page draws the trigger evidence as a chart (#trigger-chart)');
  if (chart && c.labels.trigger === 'step_time') {
    const base = evidence.baseline_step_us / 1000;
    check(
      chart.points === evidence.recent.length &&
        Math.abs(chart.base - base) < 1e-9 &&
        Math.abs(chart.limit - base * evidence.threshold) < 1e-9,
      `its ${chart.points} points are the recent seconds, its lines the baseline ${base} ms and the threshold ${chart.limit.toFixed(3)} ms`,
    );
    // The trigger fired, so the last second drawn lies above the threshold (SVG y grows down).
    check(
      chart.lastY < chart.limitY,
      `the last second is drawn past the threshold (y ${chart.lastY} above ${chart.limitY})`,
    );
  }
  check(consoleErrors.length === 0, `no page errors ${consoleErrors.join('; ')}`);
  await page.screenshot({path: join(out, 'trigger.png')});
} catch (err) {
  check(false, `unexpected: ${err.stack || err}`);
} finally {
  await browser.close();
  pod.stop();
}
console.log(failures() ? `${failures()} checks failed` : 'all passed');
process.exit(failures() ? 1 : 0);
