// What the browser tests share: their flags, the browser (exit 77, saying so, where there is
// none), the ok/FAIL lines and their count, and a `podprof demo --keep` pod stopped on exit.
import {spawnSync} from 'node:child_process';
import {existsSync, mkdtempSync, watch} from 'node:fs';
import {createRequire} from 'node:module';
import {tmpdir} from 'node:os';
import {basename, dirname, join} from 'node:path';

// The value after --name on the command line, or `fallback`.
export const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : fallback;
};

export const bin = arg('bin', 'build/bin');
export const browserPath = arg('chromium', '/usr/bin/chromium');
if (!existsSync(browserPath)) {
  console.log(`SKIP: no browser at ${browserPath} (scripts/install-deps.sh installs chromium)`);
  process.exit(77);
}
const require = createRequire(new URL('../../web/package.json', import.meta.url));
const {chromium} = require('playwright-core');

// Headless Chromium as the browser tests run it; `extraArgs`: more command-line flags.
export const launchBrowser = (extraArgs = []) =>
  chromium.launch({
    executablePath: browserPath,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-dev-shm-usage',
      '--disable-background-networking',
      ...extraArgs,
    ],
  });

let failed = 0;
// Prints one check's line; the count of failed ones is failures().
export function check(ok, what) {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (!ok) failed++;
}
export const failures = () => failed;

// A demo pod of `hosts` hosts and one 1 s capture, left running (its children get SIGTERM when
// this process exits, or at stop()); its JSON result with `dir` and `stop`. `extra`: more
// `podprof demo` flags (--generation v7x --kernel-profiling). Exits 1 when the demo fails.
export function startDemo(hosts, prefix, extra = []) {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const demo = spawnSync(
    `${bin}/podprof`,
    [
      'demo',
      '--keep',
      '--hosts',
      String(hosts),
      '--duration',
      '1s',
      '--format',
      'json',
      '--dir',
      dir,
      ...extra,
    ],
    {encoding: 'utf8'},
  );
  if (demo.status !== 0) {
    console.log(`FAIL podprof demo exited ${demo.status}:\n${demo.stderr}`);
    process.exit(1);
  }
  const result = JSON.parse(demo.stdout);
  const stop = () => {
    for (const p of result.pids) {
      try {
        process.kill(p, 'SIGTERM');
      } catch {
        /* gone */
      }
    }
  };
  process.on('exit', stop);
  return {...result, dir, stop};
}

// Resolves true once `path` exists (a daemon's ready file, written by rename into its folder),
// false if it has not after `ms`: woken by the folder's own change events, not by polling.
export function waitForFile(path, ms) {
  return new Promise((resolve) => {
    if (existsSync(path)) return resolve(true);
    const watcher = watch(dirname(path), (_, name) => {
      if (name === basename(path) && existsSync(path)) done(true);
    });
    const timer = setTimeout(() => done(existsSync(path)), ms);
    function done(ok) {
      clearTimeout(timer);
      watcher.close();
      resolve(ok);
    }
    if (existsSync(path)) done(true); // written between the first look and the watch
  });
}
