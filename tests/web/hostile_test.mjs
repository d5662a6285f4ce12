// Hostile requests against a real aggregator (a `podprof demo --keep` pod, plaintext on
// loopback, where every caller is an operator), replayed as an attacker would send them:
// raw HTTP for the crafted requests and the held slots, the CLI with the same patterns, and
// headless Chromium for what a page on another origin can make a browser do. Each attack must
// be answered (a 4xx, or a closed connection for malformed HTTP) within 1 s, the daemon must
// stay up, and a normal request must be answered meanwhile. docs/RELIABILITY.md's attack
// table is this file's list.
//
//   node tests/web/hostile_test.mjs --bin build/bin
// Exit: 0 all passed, 1 a check failed, 77 no browser here (skipped, and says so).
import {spawn, spawnSync} from 'node:child_process';
import {existsSync, mkdirSync, readFileSync, writeFileSync} from 'node:fs';
import {createServer} from 'node:http';
import https from 'node:https';
import net from 'node:net';
import {join} from 'node:path';

import {bin, check, failures, launchBrowser, startDemo} from './harness.mjs';

// The TLS phase's daemons, stopped at the end.
const tlsChildren = [];

const result = startDemo(2, 'podprof-hostile-');
const dir = result.dir;
const web = new URL(result.web_url);
const port = Number(web.port);
const capture = result.capture_id;
const stopPod = result.stop;
const aggPid = result.pids.find((p) => {
  try {
    return readFileSync(`/proc/${p}/cmdline`, 'utf8').includes('podprof-aggregator');
  } catch {
    return false;
  }
});
const alive = () => {
  try {
    process.kill(aggPid, 0);
    return true;
  } catch {
    return false;
  }
};
const rssMiB = () =>
  Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${aggPid}/status`, 'utf8'))[1]) / 1024;
const cpuSeconds = () => {
  const f = readFileSync(`/proc/${aggPid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(f[11]) + Number(f[12])) / 100; // utime + stime, in ticks of 1/100 s
};

// One raw HTTP/1.1 exchange from `from` (a loopback address: another client): resolves to
// {status, ms, body} once the response is whole or the server closes (status 0: closed with no
// answer). `hold` resolves as soon as the status line is in and keeps the socket unread.
function raw(request, {from = '127.0.0.1', hold = false, timeout = 5000} = {}) {
  return new Promise((resolve) => {
    const start = Date.now();
    const s = net.connect({host: '127.0.0.1', port, localAddress: from});
    let got = Buffer.alloc(0),
      done = false;
    const finish = () => {
      if (done) return;
      done = true;
      const text = got.toString('latin1');
      const m = /^HTTP\/1\.1 (\d{3})/.exec(text);
      resolve({
        status: m ? Number(m[1]) : 0,
        ms: Date.now() - start,
        body: text.slice(text.indexOf('\r\n\r\n') + 4),
        socket: s,
      });
      if (!hold) s.destroy();
    };
    s.setTimeout(timeout, finish);
    s.on('data', (d) => {
      got = Buffer.concat([got, d]);
      const text = got.toString('latin1');
      if (hold && /\r\n\r\n/.test(text)) {
        s.pause();
        return finish();
      }
      const head = text.indexOf('\r\n\r\n');
      const len = /content-length: (\d+)/i.exec(text.slice(0, head));
      if (head >= 0 && len && got.length >= head + 4 + Number(len[1])) finish();
    });
    s.on('end', finish);
    s.on('error', finish);
    s.write(request);
  });
}
const get = (path, headers = '') =>
  `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n${headers}Connection: close\r\n\r\n`;
const post = (path, body, type = 'application/json', headers = '') =>
  `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: ${type}\r\n${headers}` +
  `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`;
const captureCount = async () => {
  const r = await raw(get('/api/v1/captures?limit=1000'));
  return r.status === 200 ? JSON.parse(r.body).captures.length : -1;
};
// After each attack: the daemon is up and a normal request is answered.
async function stillServes(what) {
  const r = await raw(get(`/api/v1/captures/${capture}`));
  check(
    alive() && r.status === 200,
    `${what}: the aggregator is up and answers others (${r.status})`,
  );
}
async function attack(what, request, wanted, options = {}) {
  const r = await raw(request, options);
  check(
    wanted.includes(r.status) && r.ms < 1000,
    `${what}: ${r.status} in ${r.ms} ms${r.status >= 400 ? ' ' + r.body.trim().slice(0, 160) : ''}`,
  );
  await stillServes(what);
  return r;
}

try {
  const capturesBefore = await captureCount();
  check(capturesBefore >= 1, `the demo's capture is listed (${capturesBefore})`);
  const nested = '('.repeat(20000) + ')'.repeat(20000);

  // Patterns: one GET crashed the aggregator (std::regex's stack), another held a thread 26 s.
  await attack(
    '20,000 nested groups in kernel=',
    get(`/api/v1/captures/${capture}/kernels?kernel=${nested}`),
    [400],
  );
  await attack(
    'ReDoS (.*)*# in kernel=',
    get(`/api/v1/captures/${capture}/kernels?kernel=(.*)*%23`),
    [200],
  );
  await attack(
    "nested groups in an export's kernel=",
    get(`/api/v1/captures/${capture}/export?kernel=${nested}`),
    [400],
  );
  // The history route makes an exact pattern of the kernel's name: 40 KB of groups as a name.
  await attack(
    'nested groups as a kernel name in the history',
    get(`/api/v1/kernels/${nested}/history`),
    [400],
  );
  // Through the CLI: it refuses the nested pattern itself, naming its flag, before any RPC (the
  // server's own refusal of a viewer's op_regex is TlsTest.HostileRequestsWithRealCertificates-
  // AreRefused); the ReDoS pattern goes to the server and comes back at once.
  for (const [pattern, refuse] of [
    [nested, true],
    ['(.*)*#', false],
  ]) {
    const start = Date.now();
    const r = spawnSync(
      `${bin}/podprof`,
      ['stats', capture, '--kernel', pattern, '--aggregator', result.aggregator],
      {encoding: 'utf8'},
    );
    const ms = Date.now() - start;
    const refused = r.status === 2 && /--kernel: pattern is/.test(r.stderr);
    check(
      (refuse ? refused : r.status === 0) && ms < 3000,
      `podprof stats --kernel ${refuse ? pattern.length + ' bytes of groups' : pattern}: exit ${r.status} in ${ms} ms ${r.stderr.trim().slice(0, 120)}`,
    );
    await stillServes('podprof stats');
  }

  // Bodies: a deep one crashed it in nlohmann's recursive copy; numbers wrapped.
  const deep = `{"duration_ms": 5, "labels": ${'['.repeat(250000)}${']'.repeat(250000)}}`;
  await attack('250,000 nested arrays in labels', post('/api/v1/captures', deep), [400]);
  await attack(
    'duration_ms = 2^58 + 1000',
    post('/api/v1/captures', '{"duration_ms": 288230376151712744}'),
    [400],
  );
  await attack(
    'delay_ms = 2^32 + 1000',
    post('/api/v1/captures', '{"duration_ms": 100, "delay_ms": 4294968296}'),
    [400],
  );
  await attack('duration_ms as a string', post('/api/v1/captures', '{"duration_ms": "1s"}'), [400]);

  // Cross-site requests as a browser sends them from another port's page.
  const foreign =
    'Origin: http://127.0.0.1:1\r\nSec-Fetch-Site: same-site\r\nSec-Fetch-Mode: no-cors\r\n';
  await attack(
    'a no-cors text/plain POST from another origin',
    post('/api/v1/captures', '{"duration_ms": 500}', 'text/plain', foreign),
    [403, 415],
  );
  await attack(
    'a text/plain POST with no browser headers',
    post('/api/v1/captures', '{"duration_ms": 500}', 'text/plain'),
    [415],
  );
  await attack(
    'a form POST',
    post('/api/v1/captures', 'duration_ms=500', 'application/x-www-form-urlencoded'),
    [415],
  );
  await attack(
    'a JSON POST with another Origin',
    post(
      '/api/v1/captures',
      '{"duration_ms": 500}',
      'application/json',
      'Origin: http://evil.example\r\n',
    ),
    [403],
  );
  await attack(
    'a cancel from another origin',
    post(`/api/v1/captures/${capture}/cancel`, '{}', 'text/plain', foreign),
    [403, 415],
  );
  await attack(
    'an <img> GET from another site',
    get(
      `/api/v1/captures/${capture}/kernels`,
      'Sec-Fetch-Site: cross-site\r\nSec-Fetch-Mode: no-cors\r\nSec-Fetch-Dest: image\r\n',
    ),
    [403],
  );
  // DNS rebinding: the attacker's name, resolving to loopback.
  for (const path of ['/api/v1/agents', '/metrics', '/']) {
    await attack(
      `Host: evil.example on ${path}`,
      get(path).replace(`Host: 127.0.0.1:${port}`, `Host: evil.example:${port}`),
      [421],
    );
  }
  await attack(
    'Host: evil.example on a POST',
    post('/api/v1/captures', '{"duration_ms": 500}').replace(
      `Host: 127.0.0.1:${port}`,
      'Host: evil.example',
    ),
    [421],
  );
  await attack(
    'malformed HTTP',
    'GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: x\r\n\r\n',
    [0, 400],
  );
  check((await captureCount()) === capturesBefore, 'no attack started a capture');

  // Slots: 32 downloads that are never read, from one client (127.0.0.2).
  const rssBefore = rssMiB();
  const held = [];
  for (let i = 0; i < 32; i++) {
    held.push(
      await raw(get(`/api/v1/captures/${capture}/export?format=${i % 2 ? 'xprof' : 'perfetto'}`), {
        from: '127.0.0.2',
        hold: true,
      }),
    );
  }
  const admitted = held.filter((h) => h.status === 200).length;
  const turnedAway = held.filter((h) => h.status === 503).length;
  check(
    admitted === 8 && turnedAway === 24,
    `one client holding 32 downloads gets 8 streams, 24 told 503 (${admitted}, ${turnedAway})`,
  );
  const whole = await raw(get(`/api/v1/captures/${capture}/export?format=perfetto`), {
    timeout: 10000,
  });
  check(
    whole.status === 200 && /0\r\n\r\n$/.test(whole.body),
    `another client downloads an export whole meanwhile (${whole.status}, ${whole.body.length} bytes)`,
  );
  const rssHeld = rssMiB();
  check(
    rssHeld - rssBefore < 256,
    `the aggregator's memory while they are held: ${rssBefore.toFixed(0)} -> ${rssHeld.toFixed(0)} MiB (within 256 MiB more)`,
  );
  for (const h of held) h.socket.destroy();

  // Connections: 100 idle ones from one address; past its cap they are closed, others served.
  const idle = [];
  for (let i = 0; i < 100; i++)
    idle.push(
      net.connect({host: '127.0.0.1', port, localAddress: '127.0.0.3'}).on('error', () => {}),
    );
  await new Promise((r) => setTimeout(r, 500));
  await stillServes('100 idle connections from one address');
  for (const s of idle) s.destroy();

  // Out of file descriptors: the accept loop backs off instead of spinning, and serves again.
  const limit = spawnSync('prlimit', ['--pid', String(aggPid), '--nofile=80:80']);
  if (limit.status === 0) {
    const flood = [];
    for (let i = 0; i < 40; i++) {
      for (const from of ['127.0.0.4', '127.0.0.5'])
        flood.push(
          net.connect({host: '127.0.0.1', port, localAddress: from}).on('error', () => {}),
        );
    }
    await new Promise((r) => setTimeout(r, 500));
    const cpu0 = cpuSeconds();
    await new Promise((r) => setTimeout(r, 2000));
    const busy = (cpuSeconds() - cpu0) / 2;
    check(
      busy < 0.3,
      `out of descriptors, the aggregator does not spin (${(busy * 100).toFixed(0)}% of a core)`,
    );
    for (const s of flood) s.destroy();
    spawnSync('prlimit', ['--pid', String(aggPid), '--nofile=65536:65536']);
    await new Promise((r) => setTimeout(r, 300));
    await stillServes('descriptors back');
  } else {
    check(false, `prlimit --pid failed: ${limit.stderr}`);
  }

  await browserAttacks(capturesBefore);
  await tlsBrowserAttacks();
} catch (e) {
  check(false, `the hostile suite threw: ${e.stack}`);
}
stopPod();
for (const c of tlsChildren) {
  try {
    c.kill('SIGTERM');
  } catch {
    /* gone */
  }
}
console.log(
  failures() === 0 ? 'hostile: all checks passed' : `hostile: ${failures()} checks failed`,
);
process.exit(failures() === 0 ? 0 : 1);

// The page that tries what a hostile page can against `agg`: a no-cors fetch, a CORS fetch, a
// form POST, a no-cors cancel, an <img> with a hostile pattern; its title says when it is done.
function hostilePage(agg, nested) {
  return `<!doctype html><body>
<form id=f method=POST enctype="text/plain" action="${agg}/api/v1/captures" target=sink>
<input name='{"duration_ms": 700, "x": "' value='"}'></form><iframe name=sink></iframe>
<script>
(async () => {
  const out = {};
  try { await fetch('${agg}/api/v1/captures', {method: 'POST', mode: 'no-cors', body: '{"duration_ms": 600}'}); out.fetch = 'sent'; } catch (e) { out.fetch = String(e); }
  try { await fetch('${agg}/api/v1/captures', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: '{"duration_ms": 600}'}); out.cors = 'answered'; } catch (e) { out.cors = 'blocked'; }
  try { await fetch('${agg}/api/v1/captures/${capture}/cancel', {method: 'POST', mode: 'no-cors', body: '{}'}); } catch (e) {}
  await new Promise((r) => { const i = new Image(); i.onload = i.onerror = r; i.src = '${agg}/api/v1/captures/${capture}/kernels?kernel=${encodeURIComponent(nested)}'; });
  document.getElementById('f').submit();
  await new Promise((r) => setTimeout(r, 800));
  document.title = 'done ' + JSON.stringify(out);
})();
</script></body>`;
}

// A page on another origin (a server of this test's on another port) tries what a hostile page
// can: a no-cors fetch, a form POST, an <img> with a hostile pattern; then the aggregator seen
// through a rebinding name (Chromium's resolver maps evil.example to loopback).
async function browserAttacks(capturesBefore) {
  const agg = `http://127.0.0.1:${port}`;
  const nested = '('.repeat(20000) + ')'.repeat(20000);
  const evil = createServer((req, res) => {
    res.setHeader('Content-Type', 'text/html');
    res.end(hostilePage(agg, nested));
  });
  await new Promise((r) => evil.listen(0, '127.0.0.1', r));
  const evilPort = evil.address().port;
  const browser = await launchBrowser(['--host-resolver-rules=MAP evil.example 127.0.0.1']);
  try {
    const page = await browser.newPage();
    await page.goto(`http://127.0.0.1:${evilPort}/`);
    await page.waitForFunction(() => document.title.startsWith('done'), null, {timeout: 20000});
    console.log(`     the page says: ${await page.title()}`);
    await new Promise((r) => setTimeout(r, 500));
    check(
      (await captureCount()) === capturesBefore,
      'a page on another origin started no capture (no-cors fetch, CORS fetch, form POST)',
    );
    const status = await (await fetch(`${agg}/api/v1/captures/${capture}`)).json();
    check(
      status.status !== 'cancelled',
      `a page on another origin cancelled nothing (${status.status})`,
    );
    await stillServes('the hostile page');
    // Rebinding: the page's own origin is evil.example, which now resolves to the aggregator.
    const rebound = await page.goto(`http://evil.example:${port}/api/v1/agents`);
    check(rebound.status() === 421, `a rebinding name reads nothing (${rebound.status()})`);
    // The real pages still work for the user, and their own POST goes through.
    const own = await browser.newPage();
    await own.goto(`${agg}/`);
    await own.waitForSelector('body[data-ready="true"]', {timeout: 30000});
    await own.fill('#start-form input[name=duration]', '300ms');
    await own.click('#start-form button');
    await own.waitForFunction(
      () => /started (cap-\S+)/.test(document.getElementById('start-message').textContent),
      null,
      {timeout: 10000},
    );
    check(
      (await captureCount()) === capturesBefore + 1,
      "the aggregator's own page still starts a capture",
    );
  } finally {
    await browser.close();
    evil.close();
  }
}

// The same page against an aggregator under TLS, in a browser that holds an operator's
// certificate and presents it to the aggregator (playwright's clientCertificates): the browser
// sends the operator's identity with every request the page makes, so only the guard stands
// between the page and a capture. The aggregator's own page, in the same browser, still starts
// one: the certificate is presented, and the guard is what refuses the hostile page.
async function tlsBrowserAttacks() {
  const t = join(dir, 'tls');
  mkdirSync(join(t, 'nosys'), {recursive: true});
  const certs = (...a) =>
    spawnSync('bash', [
      new URL('../../scripts/make-certs.sh', import.meta.url).pathname,
      '--dir',
      t,
      '--days',
      '2',
      ...a,
    ]);
  for (const a of [
    ['ca'],
    ['aggregator', 'aggregator', 'localhost', '127.0.0.1'],
    ['agent', 'agent-0', 'localhost', '127.0.0.1'],
    ['operator', 'ops-alice'],
  ]) {
    const r = certs(...a);
    if (r.status !== 0) return check(false, `make-certs.sh ${a.join(' ')}: ${r.stderr}`);
  }
  const f = (n) => join(t, n);
  const tls = `[tls]\ncert = "${f('aggregator.crt')}"\nkey = "${f('aggregator.key')}"\nca = "${f('ca.crt')}"\n`;
  writeFileSync(
    f('agg.toml'),
    `listen = "127.0.0.1:0"\n[agents]\nheartbeat_interval = "500ms"\nprobe_interval = "1s"\n` +
      `${tls}allowed_agents = ["agent-0"]\nallowed_operators = ["ops-alice"]\n[http]\nlisten = "127.0.0.1:0"\n`,
  );
  writeFileSync(
    f('agent.toml'),
    `[tls]\ncert = "${f('agent-0.crt')}"\nkey = "${f('agent-0.key')}"\nca = "${f('ca.crt')}"\nallowed_aggregators = ["aggregator"]\n`,
  );
  const start = (args, ready) => {
    const c = spawn(args[0], args.slice(1), {stdio: 'ignore'});
    tlsChildren.push(c);
    return waitFor(() => existsSync(ready) && JSON.parse(readFileSync(ready, 'utf8')), 20000);
  };
  const agg = await start(
    [
      `${bin}/podprof-aggregator`,
      `--config=${f('agg.toml')}`,
      `--db=${f('pod.db')}`,
      `--ready-file=${f('agg.json')}`,
    ],
    f('agg.json'),
  );
  const sim = await start(
    [
      `${bin}/podprof-simhost`,
      '--profiler-port=0',
      '--metrics-port=0',
      '--chips=2',
      `--ready-file=${f('sim.json')}`,
    ],
    f('sim.json'),
  );
  if (!agg || !sim) return check(false, 'the TLS aggregator and simulated host start');
  await start(
    [
      `${bin}/podprof-agent`,
      `--config=${f('agent.toml')}`,
      '--listen=127.0.0.1:0',
      '--advertise=127.0.0.1:0',
      '--profiler-service-listen=none',
      '--http-listen=off',
      '--host-name=agent-0',
      `--sysfs-root=${f('nosys')}`,
      `--workload-profiler=127.0.0.1:${sim.profiler_port}`,
      '--workload-metrics=none',
      `--aggregator=127.0.0.1:${agg.port}`,
      `--ready-file=${f('agent.json')}`,
    ],
    f('agent.json'),
  );
  const origin = `https://127.0.0.1:${agg.http_port}`;
  const asOperator = (path) =>
    new Promise((resolve) => {
      https
        .get(
          `${origin}${path}`,
          {
            cert: readFileSync(f('ops-alice.crt')),
            key: readFileSync(f('ops-alice.key')),
            ca: readFileSync(f('ca.crt')),
          },
          (res) => {
            let body = '';
            res.on('data', (d) => {
              body += d;
            });
            res.on('end', () => resolve({status: res.statusCode, body}));
          },
        )
        .on('error', (e) => resolve({status: 0, body: String(e)}));
    });
  const online = await waitFor(async () => {
    const r = await asOperator('/api/v1/agents');
    return r.status === 200 && JSON.parse(r.body).agents.some((a) => a.state === 'online');
  }, 20000);
  check(online, 'under TLS: agent-0 registers with the aggregator');
  const captures = async () =>
    JSON.parse((await asOperator('/api/v1/captures')).body).captures.length;

  const evil = createServer((req, res) => {
    res.setHeader('Content-Type', 'text/html');
    res.end(hostilePage(origin, '('.repeat(20000) + ')'.repeat(20000)));
  });
  await new Promise((r) => evil.listen(0, '127.0.0.1', r));
  const browser = await launchBrowser();
  try {
    const context = await browser.newContext({
      ignoreHTTPSErrors: true,
      clientCertificates: [{origin, certPath: f('ops-alice.crt'), keyPath: f('ops-alice.key')}],
    });
    const page = await context.newPage();
    await page.goto(`http://127.0.0.1:${evil.address().port}/`);
    await page.waitForFunction(() => document.title.startsWith('done'), null, {timeout: 20000});
    await new Promise((r) => setTimeout(r, 500));
    check(
      (await captures()) === 0,
      `under TLS, a page on another origin in a browser holding an operator's certificate started no capture (${await page.title()})`,
    );
    const own = await context.newPage();
    await own.goto(`${origin}/`);
    await own.waitForSelector('body[data-ready="true"]', {timeout: 30000});
    await own.fill('#start-form input[name=duration]', '300ms');
    await own.click('#start-form button');
    const started = await own
      .waitForFunction(
        () => /started (cap-\S+)/.test(document.getElementById('start-message').textContent),
        null,
        {timeout: 10000},
      )
      .then(
        () => true,
        () => false,
      );
    check(
      started && (await captures()) === 1,
      "under TLS, the aggregator's own page in that browser starts a capture (the certificate is presented)",
    );
  } finally {
    await browser.close();
    evil.close();
  }
}

// Polls `f` (sync or async) every 100 ms until it returns something truthy or `ms` pass.
async function waitFor(f, ms) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    const v = await f();
    if (v) return v;
    await new Promise((r) => setTimeout(r, 100));
  }
  return null;
}
