// The capture page: its hosts, top kernels, the pod timeline and waits heatmap (timeline.js,
// heatmap.js), a multi-slice capture's slice view (slice_view.js) and its exports, Perfetto's
// UI among them; drawn from the JSON API.
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

  // A triggered snapshot's reserved labels (aggregator/recorder/triggers.h): shown as the trigger's box
  // below, not as label text (the evidence is JSON). Stored as they are.
  const TRIGGER_LABELS = ['trigger', 'reason', 'telemetry', 'trigger_ns'];
  function shownLabels(labels) {
    if (!labels || !labels.trigger) return labels;
    return Object.fromEntries(Object.entries(labels).filter(([k]) => !TRIGGER_LABELS.includes(k)));
  }

  // The figures that made a trigger hold, or {} where they are not JSON.
  function evidenceOf(labels) {
    try {
      const e = JSON.parse(labels.telemetry || '{}');
      return e && typeof e === 'object' ? e : {};
    } catch {
      return {};
    }
  }

  // What a trigger's chart draws: the recent seconds' pod median (step time in ms, or duty
  // cycle in %), its baseline and the threshold the trigger fired past; null for a trigger whose
  // evidence holds no series (straggler, hang, webhook, a person).
  function evidenceSeries(trigger, e) {
    if (!Array.isArray(e.recent) || !e.recent.length || !(e.threshold > 0)) return null;
    if (trigger === 'step_time' && e.baseline_step_us > 0) {
      const base = e.baseline_step_us / 1000;
      return {
        what: 'pod median step time, ms',
        before: (e.baseline || []).map(([, us]) => us / 1000),
        values: e.recent.map(([, us]) => us / 1000),
        base,
        limit: base * e.threshold,
        unit: ' ms',
      };
    }
    if (trigger === 'duty_cycle' && e.baseline_duty_percent > 0) {
      const base = e.baseline_duty_percent;
      return {
        what: 'pod median duty cycle, %',
        before: (e.baseline || []).map(([, pct]) => pct),
        values: e.recent.map(([, pct]) => pct),
        base,
        limit: base * e.threshold,
        unit: '%',
      };
    }
    return null;
  }

  // An inline SVG sparkline of `s` (evidenceSeries): the baseline's seconds grey, the recent
  // ones blue, the baseline's median dotted and the threshold dashed.
  function sparkline(s) {
    const W = 240,
      H = 56,
      pad = 4;
    const n = s.before.length + s.values.length;
    const all = [...s.before, ...s.values, s.base, s.limit];
    const lo = Math.min(...all),
      hi = Math.max(...all);
    const span = hi - lo || 1;
    const y = (v) => (pad + (H - 2 * pad) * (1 - (v - lo) / span)).toFixed(1);
    const x = (i) => (pad + ((W - 2 * pad) * i) / Math.max(1, n - 1)).toFixed(1);
    const ns = 'http://www.w3.org/2000/svg';
    const svg = document.createElementNS(ns, 'svg');
    const add = (tag, attrs) => {
      const e = document.createElementNS(ns, tag);
      for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
      svg.append(e);
      return e;
    };
    svg.setAttribute('viewBox', `0 0 ${W} ${H}`);
    svg.setAttribute('width', W);
    svg.setAttribute('height', H);
    svg.setAttribute('id', 'trigger-chart');
    svg.setAttribute('role', 'img');
    add('title', {}).textContent =
      `${s.what}: the ${s.before.length} s of the baseline (grey) and the last ` +
      `${s.values.length} s (blue); dotted: the baseline's median, dashed: the threshold`;
    // Drawn with attributes of their own, so the chart needs no rule of app.css.
    const line = (v, cls, dash, color) =>
      add('line', {
        x1: pad,
        x2: W - pad,
        y1: y(v),
        y2: y(v),
        class: cls,
        'data-value': v,
        stroke: color,
        'stroke-dasharray': dash,
      });
    line(s.base, 'baseline', '1 3', '#777');
    line(s.limit, 'threshold', '5 3', '#c0392b');
    if (s.before.length > 1) {
      add('polyline', {
        points: s.before.map((v, i) => `${x(i)},${y(v)}`).join(' '),
        class: 'before',
        fill: 'none',
        stroke: '#999',
        'stroke-width': 1,
      });
    }
    const at = s.before.length;
    add('polyline', {
      points: s.values.map((v, i) => `${x(at + i)},${y(v)}`).join(' '),
      class: 'series',
      fill: 'none',
      stroke: '#2c6fbb',
      'stroke-width': 1.5,
    });
    return svg;
  }

  // A triggered snapshot's cause (#53): its reason as a sentence and, where the evidence holds
  // the recent seconds, a small chart of them against the baseline and the threshold. Null for
  // a capture no trigger took.
  function triggerBox(c, el) {
    const labels = c.labels || {};
    if (!labels.trigger) return null;
    const e = evidenceOf(labels);
    const box = el(
      'div',
      {id: 'trigger', class: 'trigger'},
      el('strong', {}, `Trigger ${labels.trigger}: `),
      el('span', {id: 'trigger-reason'}, labels.reason || '(no reason given)'),
    );
    const s = evidenceSeries(labels.trigger, e);
    if (s) {
      const last = s.values[s.values.length - 1];
      box.append(
        el(
          'div',
          {class: 'trigger-chart'},
          sparkline(s),
          el(
            'span',
            {class: 'muted'},
            ` ${s.what}: the baseline's ${s.before.length} s (grey), the last ` +
              `${s.values.length} s (blue, last ${last.toFixed(2)}${s.unit}); dotted: the ` +
              `baseline ${s.base.toFixed(2)}${s.unit}, dashed: the threshold ` +
              `${s.limit.toFixed(2)}${s.unit}`,
          ),
        ),
      );
    }
    const also = (e.holding || []).filter((t) => t !== labels.trigger);
    if (also.length) box.append(el('div', {class: 'muted'}, `Also holding: ${also.join(', ')}`));
    return box;
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
      hm = el('div', {id: 'heatmap'}),
      slicesAt = el('div', {id: 'slices'}); // slice_view.js: empty without DCN transfers
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
        `${fmtCount(c.chips)} chips · ${fmtCount(c.events)} events · ` +
          labelsText(shownLabels(c.labels)),
      ),
      windowBanner(c, el) || '',
      triggerBox(c, el) || '',
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
      slicesAt,
      el('h2', {}, 'Hosts'),
      hosts,
      el('h2', {}, 'Top kernels'),
      kernelsAt,
    );
    P.timeline = new P.PodTimeline(timelineAt, c, null);
    const timelineP = P.timeline.load();
    const kernelsP = api(`/api/v1/captures/${enc(id)}/kernels?top=15`);
    const stragglersP = api(`/api/v1/captures/${enc(id)}/stragglers`);
    const slicesP = P.loadSliceView(id, slicesAt);

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
    await slicesP;
    await timelineP;
    P.heatmap = new P.WaitHeatmap(hm, P.timeline.waits);
    performance.mark('heatmap-drawn');
  };
})();
