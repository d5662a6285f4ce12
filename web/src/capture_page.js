// The capture page: its hosts, top kernels, the pod timeline and waits heatmap (timeline.js,
// heatmap.js) and its exports, Perfetto's UI among them; drawn from the JSON API.
(() => {
  'use strict';
  const P = (window.podprof = window.podprof || {});
  const {headerRow, headedTable, labelsText, kernelCells} = P.ui; // pages.js
  const enc = encodeURIComponent;

  // The capture's top kernels, each linking to its page, with their verdicts.
  function kernelTable(rows, captureId) {
    const {el, fmtPs, fmtCount, fmtTflops} = P;
    const t = headedTable(
      {id: 'kernels'},
      ['Kernel', 'Module'],
      ['Count', 'Total', 'Mean', 'P50', 'P99', 'TFLOP/s'],
      ['Verdict'],
    );
    for (const k of rows) {
      t.append(
        el(
          'tr',
          {},
          kernelCells(k.kernel, k.module, captureId),
          el('td', {class: 'num'}, fmtCount(k.count)),
          el('td', {class: 'num'}, fmtPs(k.total_ps)),
          el('td', {class: 'num'}, fmtPs(k.mean_ps)),
          el('td', {class: 'num'}, fmtPs(k.p50_ps)),
          el('td', {class: 'num'}, fmtPs(k.p99_ps)),
          el('td', {class: 'num'}, fmtTflops(k.achieved_tflops)),
          el('td', {title: k.insight.verdict_text}, k.insight.verdict_text || k.insight.verdict),
        ),
      );
    }
    return t;
  }

  // Posts the trace to a Perfetto UI (its postMessage protocol: PING until PONG, then the
  // trace's bytes), so that a self-hosted UI opens it without a file dialog.
  async function openInPerfetto(url, id, msg) {
    msg.textContent = 'exporting…';
    const res = await fetch(`/api/v1/captures/${enc(id)}/export?format=perfetto`);
    if (!res.ok) {
      msg.textContent = `export failed: ${res.status}`;
      return;
    }
    const buffer = await res.arrayBuffer();
    const win = window.open(url);
    if (!win) {
      msg.textContent = 'the browser blocked the new window';
      return;
    }
    const origin = new URL(url).origin;
    let tries = 0;
    const ping = setInterval(() => {
      if (++tries > 100) {
        clearInterval(ping);
        msg.textContent = `no answer from ${url}`;
        return;
      }
      win.postMessage('PING', origin);
    }, 100);
    window.addEventListener('message', function onPong(ev) {
      if (ev.source !== win || ev.data !== 'PONG') return;
      clearInterval(ping);
      window.removeEventListener('message', onPong);
      win.postMessage({perfetto: {buffer, title: id, fileName: `${id}.pftrace`}}, origin);
      msg.textContent = `sent ${P.fmtBytes(buffer.byteLength)} to ${origin}`;
    });
  }

  // A snapshot's window in a sentence (#53): which seconds it holds decides what every figure
  // on the page means. Null for other captures and for snapshots stored before it was said.
  function windowBanner(c, el) {
    if (c.source !== 'snapshot' || !c.window) return null;
    const texts = {
      'before-request': 'Snapshot of the seconds before the request, from the flight recorders.',
      'after-request':
        'Snapshot of the seconds AFTER the request, not before it: a host had no flight ' +
        'recorder armed, so the pod was captured live from the request on (see each host’s note).',
      mixed:
        'Snapshot of mixed windows: some hosts hold the seconds before the request, some the ' +
        'seconds after it (see each host’s note).',
    };
    const cls = c.window === 'before-request' ? 'muted' : 'warn';
    return el('div', {class: cls, id: 'window-banner'}, texts[c.window] || `Window: ${c.window}`);
  }

  // How much a host's warning matters to reading the capture, as `podprof capture` orders them:
  // the window it holds first, its runtime status last.
  function warningRank(w) {
    if (/flight recorder|from the request on|after the request/.test(w)) return 0;
    if (/^(no )?runtime status/.test(w)) return 2;
    return 1;
  }

  P.pages.capture = async (id, main) => {
    const {el, api, fmtTime, fmtSpan, fmtCount} = P;
    const [c, ui] = await Promise.all([api(`/api/v1/captures/${enc(id)}`), api('/api/v1/ui')]);
    // The page's frame first and the timeline's request with it, while the page is small to lay
    // out; the tables fill in while the timeline (and the waits heatmap's data) loads.
    const msg = el('span', {class: 'muted'});
    const exp = (f, label) =>
      el('a', {href: `/api/v1/captures/${enc(id)}/export?format=${f}`, download: ''}, label);
    const hosts = el('table', {id: 'hosts'}),
      kernelsAt = el('div');
    const timelineAt = el('div', {id: 'timeline'}),
      hm = el('div', {id: 'heatmap'});
    const legend = el(
      'div',
      {class: 'legend'},
      'Scroll to zoom, drag to pan, Shift+scroll for more chips, double-click to reset. ',
    );
    main.append(
      el('h1', {}, `Capture ${c.capture} `, P.stateCell(c.status)),
      el(
        'div',
        {class: 'muted'},
        `${fmtTime(c.start_ns)} · ${fmtSpan(c.start_ns, c.end_ns)} · ${fmtCount(c.hosts)} hosts · `,
        `${fmtCount(c.chips)} chips · ${fmtCount(c.events)} events · ${labelsText(c.labels)}`,
      ),
      windowBanner(c, el) || '',
      el(
        'div',
        {class: 'row', id: 'exports'},
        'Export:',
        exp('perfetto', 'Perfetto'),
        exp('chrome', 'Chrome JSON'),
        exp('xprof', 'XProf session (.tar)'),
        el('button', {onclick: () => openInPerfetto(ui.perfetto_ui, id, msg)}, 'Open in Perfetto'),
        msg,
      ),
      el('h2', {}, 'Pod timeline'),
      legend,
      timelineAt,
      el('h2', {}, 'Collective waits per chip and step'),
      hm,
      el('h2', {}, 'Hosts'),
      hosts,
      el('h2', {}, 'Top kernels'),
      kernelsAt,
    );
    P.timeline = new P.PodTimeline(timelineAt, c, null);
    const timelineP = P.timeline.load();
    const kernelsP = api(`/api/v1/captures/${enc(id)}/kernels?top=15`);
    const stragglersP = api(`/api/v1/captures/${enc(id)}/stragglers`);

    hosts.append(
      headerRow(
        ['Host', 'State'],
        ['Clock correction', '±', 'Drift', 'Events'],
        ['Error', 'Notes'],
      ),
    );
    for (const h of c.hosts_detail) {
      // A host's clock figures only where its capture completed, as `podprof capture` shows
      // them: a failed host's correction was never settled.
      const settled = (v) => (h.status === 'complete' ? v : '-');
      hosts.append(
        el(
          'tr',
          {},
          el('td', {}, h.host),
          el('td', {}, P.stateCell(h.status)),
          el('td', {class: 'num'}, settled(P.fmtSignedNs(h.clock_offset_ns))),
          el('td', {class: 'num'}, settled(P.fmtSignedNs(h.clock_uncertainty_ns))),
          el('td', {class: 'num'}, settled(P.fmtPpm(h.clock_drift_ppb / 1000))),
          el('td', {class: 'num'}, fmtCount(h.events)),
          el('td', {}, h.error),
          el(
            'td',
            {class: 'notes'},
            [...(h.warnings || [])]
              .map((w, i) => [warningRank(w), i, w])
              .sort((a, b) => a[0] - b[0] || a[1] - b[1])
              .map(([, , w]) => w)
              .join('; '),
          ),
        ),
      );
    }
    // The aggregator's verdict, not the ranking's first row: some chip always tops the ranking.
    const st = await stragglersP;
    const named = st.straggler_named ? st.stragglers.find((s) => s.significant) : null;
    legend.append(
      named
        ? el('span', {class: 'straggler', id: 'straggler-verdict'}, `Straggler: ${st.verdict}`)
        : el(
            'span',
            {id: 'straggler-verdict'},
            st.verdict.charAt(0).toUpperCase() + st.verdict.slice(1),
          ),
    );
    P.timeline.setStraggler(named || null);
    kernelsAt.append(kernelTable((await kernelsP).rows, id));
    await timelineP;
    P.heatmap = new P.WaitHeatmap(hm, P.timeline.waits);
    performance.mark('heatmap-drawn');
  };
})();
