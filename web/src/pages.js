// The pages: captures (live progress, a start form), one capture (hosts, kernels, the pod
// timeline and waits heatmap, exports), one kernel (texts, per-chip rows, history chart) and
// the diff of two captures, each drawn from the JSON API.
(() => {
  'use strict';
  const P = (window.podprof = window.podprof || {});
  const pages = (P.pages = {});
  const enc = encodeURIComponent;

  // "2s", "500ms", "1m" -> ms; NaN when unreadable.
  function parseDurationMs(text) {
    const m = String(text)
      .trim()
      .match(/^(\d+(?:\.\d+)?)\s*(ms|s|m)?$/);
    if (!m) return NaN;
    return Number(m[1]) * {ms: 1, s: 1000, m: 60000}[m[2] || 's'];
  }

  function startForm(onStarted) {
    const {el, api} = P;
    const msg = el('span', {class: 'muted', id: 'start-message'});
    const form = el(
      'form',
      {class: 'start card', id: 'start-form'},
      el('strong', {}, 'Start a capture  '),
      el('label', {}, 'duration ', el('input', {name: 'duration', value: '2s', size: 6})),
      el('label', {}, 'hosts ', el('input', {name: 'hosts', placeholder: 'all', size: 24})),
      el('label', {}, 'labels ', el('input', {name: 'labels', placeholder: 'k=v,k2=v2', size: 20})),
      el('button', {type: 'submit'}, 'Capture'),
      ' ',
      msg,
    );
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const f = new FormData(form);
      const duration_ms = parseDurationMs(f.get('duration'));
      if (!(duration_ms > 0)) {
        msg.textContent = `duration "${f.get('duration')}": say 2s or 500ms`;
        return;
      }
      const labels = {};
      for (const kv of String(f.get('labels')).split(',').filter(Boolean)) {
        const [k, ...v] = kv.split('=');
        labels[k.trim()] = v.join('=').trim();
      }
      const hosts = String(f.get('hosts'))
        .split(',')
        .map((h) => h.trim())
        .filter(Boolean);
      try {
        const r = await api('/api/v1/captures', {
          method: 'POST',
          headers: {'Content-Type': 'application/json'},
          body: JSON.stringify({duration_ms, hosts, labels}),
        });
        msg.textContent = `started ${r.capture} on ${r.hosts.length} hosts`;
        onStarted(r.capture);
      } catch (err) {
        msg.textContent = String(err.message);
      }
    });
    return form;
  }

  // Follows a running capture's progress (server-sent events) in its row.
  function watch(id, row, onDone) {
    const {el} = P;
    const bar = el('span', {style: 'width:0%'});
    const text = el('span', {class: 'hosts-live'});
    const cell = row.querySelector('.live');
    cell.replaceChildren(el('span', {class: 'progress'}, bar), ' ', text);
    const hosts = new Map();
    const es = new EventSource(`/api/v1/captures/${enc(id)}/events`);
    const update = (ev) => {
      const p = JSON.parse(ev.data);
      bar.style.width = `${Math.min(100, p.percent)}%`;
      if (p.host) hosts.set(p.host.host, p.host.status);
      const shown = [...hosts].map(([h, s]) => `${h} ${s}`).join(', ');
      const tail = shown ? ` · ${shown}` : '';
      text.textContent = `${Math.round(p.percent)}% ${p.detail || ''}${tail}`;
      row.dataset.percent = p.percent;
      row.dataset.updates = Number(row.dataset.updates || 0) + 1;
      if (ev.type === 'done') {
        es.close();
        row.querySelector('.state').replaceChildren(P.stateCell(p.status));
        onDone();
      }
    };
    es.addEventListener('progress', update);
    es.addEventListener('done', update);
    es.onerror = () => {
      if (es.readyState === EventSource.CLOSED) text.textContent += ' (connection lost)';
    };
  }

  // A capture's labels (an object of strings) as "k=v k2=v2".
  function labelsText(labels) {
    return Object.entries(labels || {})
      .map(([k, v]) => `${k}=${v}`)
      .join(' ');
  }

  async function fillCaptures(table, compare) {
    const {el, api, fmtTime, fmtNs, fmtCount} = P;
    const r = await api('/api/v1/captures?limit=200');
    const head = el(
      'tr',
      {},
      el('th', {}, ''),
      ['Capture', 'State', 'Started', 'Length'].map((h) => el('th', {}, h)),
      ['Hosts', 'Chips', 'Kernels', 'Events'].map((h) => el('th', {class: 'num'}, h)),
      el('th', {}, 'Labels'),
      el('th', {}, 'Progress'),
    );
    table.replaceChildren(head);
    for (const c of r.captures) {
      const row = el(
        'tr',
        {'data-capture': c.capture},
        el('td', {}, el('input', {type: 'checkbox', value: c.capture, onchange: compare})),
        el('td', {}, el('a', {href: `/captures/${enc(c.capture)}`}, c.capture)),
        el('td', {class: 'state'}, P.stateCell(c.status)),
        el('td', {}, fmtTime(c.start_ns)),
        el('td', {}, fmtNs(c.end_ns - c.start_ns)),
        el('td', {class: 'num'}, c.hosts),
        el('td', {class: 'num'}, c.chips),
        el('td', {class: 'num'}, c.kernels),
        el('td', {class: 'num'}, fmtCount(c.events)),
        el('td', {}, labelsText(c.labels)),
        el('td', {class: 'live'}),
      );
      table.append(row);
      if (c.status === 'running')
        watch(c.capture, row, () => setTimeout(() => fillCaptures(table, compare), 500));
    }
    if (!r.captures.length)
      table.append(el('tr', {}, el('td', {colspan: 11, class: 'muted'}, 'No captures yet.')));
  }

  pages.captures = async (m, main) => {
    const {el, api} = P;
    const ui = await api('/api/v1/ui');
    const table = el('table', {id: 'captures'});
    const link = el('a', {id: 'compare', style: 'display:none'}, 'Compare the two selected');
    const compare = () => {
      const picked = [...table.querySelectorAll('input:checked')].map((i) => i.value);
      link.style.display = picked.length === 2 ? '' : 'none';
      // Newest first in the table: the older one is the baseline.
      if (picked.length === 2)
        link.href = `/diff?baseline=${enc(picked[1])}&candidate=${enc(picked[0])}`;
    };
    main.append(el('h1', {}, 'Captures'));
    if (ui.operator) main.append(startForm(() => fillCaptures(table, compare)));
    main.append(el('div', {class: 'row'}, link), table);
    await fillCaptures(table, compare);
  };

  function kernelTable(rows, captureId) {
    const {el, fmtPs, fmtCount} = P;
    const t = el(
      'table',
      {id: 'kernels'},
      el(
        'tr',
        {},
        el('th', {}, 'Kernel'),
        el('th', {}, 'Module'),
        ['Count', 'Total', 'Mean', 'P50', 'P99', 'TFLOP/s'].map((h) => el('th', {class: 'num'}, h)),
        el('th', {}, 'Verdict'),
      ),
    );
    for (const k of rows) {
      t.append(
        el(
          'tr',
          {},
          el(
            'td',
            {},
            el(
              'a',
              {href: `/kernels/${enc(k.kernel)}?capture=${enc(captureId)}&module=${enc(k.module)}`},
              k.kernel,
            ),
          ),
          el('td', {}, k.module || '-'),
          el('td', {class: 'num'}, fmtCount(k.count)),
          el('td', {class: 'num'}, fmtPs(k.total_ps)),
          el('td', {class: 'num'}, fmtPs(k.mean_ps)),
          el('td', {class: 'num'}, fmtPs(k.p50_ps)),
          el('td', {class: 'num'}, fmtPs(k.p99_ps)),
          el('td', {class: 'num'}, k.achieved_tflops ? k.achieved_tflops.toFixed(1) : '-'),
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
      msg.textContent = `sent ${P.fmtCount(buffer.byteLength)} bytes to ${origin}`;
    });
  }

  pages.capture = async (id, main) => {
    const {el, api, fmtTime, fmtNs, fmtCount} = P;
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
        `${fmtTime(c.start_ns)} · ${fmtNs(c.end_ns - c.start_ns)} · ${c.hosts} hosts · `,
        `${c.chips} chips · ${fmtCount(c.events)} events · ${labelsText(c.labels)}`,
      ),
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
      el(
        'tr',
        {},
        el('th', {}, 'Host'),
        el('th', {}, 'State'),
        ['Clock correction', '±', 'Drift (ppm)', 'Events'].map((h) => el('th', {class: 'num'}, h)),
        el('th', {}, 'Error'),
      ),
    );
    for (const h of c.hosts_detail) {
      hosts.append(
        el(
          'tr',
          {},
          el('td', {}, h.host),
          el('td', {}, P.stateCell(h.status)),
          el('td', {class: 'num'}, fmtNs(h.clock_offset_ns)),
          el('td', {class: 'num'}, fmtNs(h.clock_uncertainty_ns)),
          el('td', {class: 'num'}, (h.clock_drift_ppb / 1000).toFixed(2)),
          el('td', {class: 'num'}, fmtCount(h.events)),
          el('td', {}, h.error),
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

  // HLO and MLIR lines run long (a custom call's backend_config is one line): wrapped
  // (app.css, pre.code-text), not cut off at the page's edge.
  function textBlock(title, text) {
    return text ? [P.el('h2', {}, title), P.el('pre', {class: 'code-text'}, text)] : [];
  }

  // p50 and p99 over time; a point the API marks a regression (its p50 past the previous
  // capture's by `podprof diff`'s rule, judged by the aggregator) is drawn in red.
  function historyChart(where, points) {
    const xs = points.map((p) => p.start_ns / 1e9);
    const p50 = points.map((p) => p.p50_ps / 1e6),
      p99 = points.map((p) => p.p99_ps / 1e6);
    const reg = points.map((p) => (p.regression ? p.p50_ps / 1e6 : null));
    const width = Math.max(400, Math.min(1100, where.clientWidth || 900));
    // The captures with a margin. uPlot gives a lone point a span of 86400 / its ms option,
    // 1000 days for times in seconds: one capture would sit at the edge of three years.
    const lone = xs.length > 0 && xs.every((x) => x === xs[0]);
    const xRange = (u, min, max) => {
      if (lone) return [xs[0] - 3600, xs[0] + 3600];
      const pad = Math.max(60, (max - min) * 0.05);
      return [min - pad, max + pad];
    };
    const chart = new uPlot(
      {
        width,
        height: 260,
        scales: {x: {time: true, range: xRange}},
        series: [
          {},
          {label: 'p50 (us)', stroke: '#2f6fdf', points: {show: true, size: 7}},
          {label: 'p99 (us)', stroke: '#b26a00', points: {show: true, size: 7}},
          {
            label: 'regression',
            stroke: '#c62828',
            paths: () => null,
            points: {show: true, size: 12, fill: '#c62828'},
          },
        ],
        axes: [{}, {label: 'us'}],
      },
      [xs, p50, p99, reg],
      where,
    );
    return chart;
  }

  // The units kernel profiling measures, in `podprof kernel`'s order (insight::kUnitNames), with
  // their column names.
  const PROFILE_UNITS = [
    ['mxu', 'MXU'],
    ['vpu', 'VPU'],
    ['vector_alu', 'VALU'],
    ['vector_load', 'VLD'],
    ['vector_store', 'VST'],
    ['scalar_alu', 'Scalar'],
    ['xlu', 'XLU'],
    ['hbm_bandwidth', 'HBM BW'],
  ];

  // The MXU's busy share where counters measured it: kernel profiling's figure, else an
  // `mxu_busy` gauge's (report/kernel_rows.cc); null where nothing did, shown "-", never 0.
  function mxuBusy(insight) {
    const units = (insight.kernel_profile || {}).units || {};
    if (units.mxu !== undefined) return units.mxu;
    const u = insight.utilization || {};
    return u.mxu_busy !== undefined ? u.mxu_busy : null;
  }
  const verdictCell = (insight) => insight.cause || insight.verdict || '-';
  // Longest total time first: the chip that spent most in the kernel heads the table.
  const byTime = (rows) =>
    [...rows].sort(
      (a, b) => b.total_ps - a.total_ps || a.host.localeCompare(b.host) || a.chip - b.chip,
    );

  function perChipTable(rows) {
    const {el, fmtPs, fmtPct, fmtCount} = P;
    const num = (v) => el('td', {class: 'num'}, v);
    const t = el(
      'table',
      {id: 'per-chip'},
      el(
        'tr',
        {},
        el('th', {}, 'Host'),
        ['Chip', 'Count', 'Total', 'Mean', 'P50', 'P99', 'Max', 'MXU', 'Throttle', 'Wait'].map(
          (h) => el('th', {class: 'num'}, h),
        ),
        el('th', {}, 'Verdict'),
      ),
    );
    for (const r of byTime(rows)) {
      const p = r.insight.kernel_profile;
      t.append(
        el(
          'tr',
          {'data-host': r.host, 'data-chip': r.chip},
          el('td', {}, r.host),
          num(r.chip),
          num(fmtCount(r.count)),
          num(fmtPs(r.total_ps)),
          num(fmtPs(r.mean_ps)),
          num(fmtPs(r.p50_ps)),
          num(fmtPs(r.p99_ps)),
          num(fmtPs(r.max_ps)),
          num(fmtPct(mxuBusy(r.insight))),
          num(throttledCell(p)),
          num(fmtPct(r.insight.wait_fraction)),
          el('td', {title: r.insight.verdict_text}, verdictCell(r.insight)),
        ),
      );
    }
    return t;
  }

  // The share of clock cycles the power manager skipped, where it counted them; '-' elsewhere:
  // nothing else measures throttling.
  const throttledCell = (p) => (p && p.power_manager ? P.fmtPct(p.throttled) : '-');

  // "units busy: MXU 12.0%, ... · power manager: 2.6% of cycles skipped (die 0 ..., die 1 ...) ·
  // 55.0% of its time in sync waits", `podprof kernel`'s lines for one profile.
  function profileText(p) {
    const {fmtPct} = P;
    const units = PROFILE_UNITS.filter(([u]) => p.units[u] !== undefined).map(
      ([u, n]) => `${n} ${fmtPct(p.units[u])}`,
    );
    const parts = [`units busy: ${units.join(', ') || '-'}`];
    if (p.power_manager) {
      const dies = (p.dies || [])
        .filter((d) => d.power_manager)
        .map((d) => `die ${d.die} ${fmtPct(d.throttled)}`);
      const perDie = dies.length ? ` (${dies.join(', ')})` : '';
      parts.push(`power manager: ${fmtPct(p.throttled)} of cycles skipped${perDie}`);
    }
    if (p.sync_wait > 0) parts.push(`${fmtPct(p.sync_wait)} of its time in sync waits`);
    if (p.missing) parts.push(`no utilization figures: ${p.missing}`);
    for (const d of p.dies || [])
      if (d.missing) parts.push(`die ${d.die}: ${d.missing}, no figures`);
    return parts.join(' · ');
  }

  // XProf's Utilization Viewer rows of a profile, as `podprof kernel` prints them: pooled over
  // the dies (each row's achieved and peak summed), and each die's beside them, '-' where a die
  // lacks the row.
  function utilizationTable(p, attrs) {
    const {el, fmtPct} = P;
    const num = (v) => el('td', {class: 'num'}, v);
    const count = (v) => Number(v).toPrecision(4);
    const share = (r) => fmtPct(r.peak > 0 ? r.achieved / r.peak : 0);
    const dies = (p.dies || []).filter((d) => !d.missing);
    const t = el(
      'table',
      Object.assign({class: 'utilization'}, attrs),
      el(
        'tr',
        {},
        el('th', {}, 'Row'),
        el('th', {}, 'Unit'),
        ['Achieved', 'Peak', 'Share'].map((h) => el('th', {class: 'num'}, h)),
        dies.flatMap((d) =>
          ['Achieved', 'Peak', 'Share'].map((h) =>
            el('th', {class: 'num', 'data-die': d.die}, `Die ${d.die} ${h}`),
          ),
        ),
      ),
    );
    for (const r of p.rows || []) {
      // flatMap: el() flattens its children one level only.
      const cells = dies.flatMap((d) => {
        const dr = (d.rows || []).find((x) => x.name === r.name);
        return dr
          ? [
              num(count(dr.achieved)),
              num(count(dr.peak)),
              el('td', {class: 'num', 'data-die': d.die}, share(dr)),
            ]
          : [num('-'), num('-'), el('td', {class: 'num', 'data-die': d.die}, '-')];
      });
      t.append(
        el(
          'tr',
          {'data-row': r.name},
          el('td', {}, r.name),
          el('td', {class: 'muted'}, r.unit),
          num(count(r.achieved)),
          num(count(r.peak)),
          el('td', {class: 'num', 'data-pooled': ''}, share(r)),
          cells,
        ),
      );
    }
    return t;
  }

  // Each chip's performance counters: the units' busy shares, its cycles and the power
  // manager's throttling, a row per die under it; then each chip's Utilization Viewer rows.
  function profileTable(rows) {
    const {el, fmtPct} = P;
    const num = (v) => el('td', {class: 'num'}, v);
    const t = el(
      'table',
      {id: 'profile-chips'},
      el(
        'tr',
        {},
        el('th', {}, 'Host'),
        el('th', {class: 'num'}, 'Chip'),
        PROFILE_UNITS.map(([, n]) => el('th', {class: 'num'}, n)),
        ['Cycles', 'Throttled', 'Sync wait'].map((h) => el('th', {class: 'num'}, h)),
        el('th', {}, 'Cause'),
      ),
    );
    for (const r of byTime(rows)) {
      const p = r.insight.kernel_profile;
      if (!p) continue;
      t.append(
        el(
          'tr',
          {'data-host': r.host, 'data-chip': r.chip},
          el('td', {}, r.host),
          num(r.chip),
          PROFILE_UNITS.map(([u]) => num(p.units[u] !== undefined ? fmtPct(p.units[u]) : '-')),
          num(p.missing ? '-' : Number(p.cycles).toPrecision(4)),
          num(throttledCell(p)),
          num(fmtPct(p.sync_wait)),
          el(
            'td',
            {title: p.missing || r.insight.verdict_text},
            p.missing ? p.missing : verdictCell(r.insight),
          ),
        ),
      );
      // Each die on its own row under its chip: one die at 63% and the other at 10% is not 37%.
      for (const d of p.dies || []) {
        t.append(
          el(
            'tr',
            {class: 'die', 'data-host': r.host, 'data-chip': r.chip, 'data-die': d.die},
            el('td', {}, ''),
            el('td', {class: 'num'}, `die ${d.die}`),
            PROFILE_UNITS.map(([u]) =>
              num(d.units && d.units[u] !== undefined ? fmtPct(d.units[u]) : '-'),
            ),
            num(d.missing ? '-' : Number(d.cycles).toPrecision(4)),
            num(d.missing ? '-' : throttledCell(d)),
            num(''),
            el('td', {class: 'muted'}, d.missing || ''),
          ),
        );
      }
    }
    return t;
  }

  // Each chip's Utilization Viewer rows, folded: sixteen chips' rows would bury the page.
  function chipUtilization(rows) {
    const {el} = P;
    return byTime(rows)
      .filter((r) => r.insight.kernel_profile && (r.insight.kernel_profile.rows || []).length)
      .map((r) =>
        el(
          'details',
          {class: 'chip-utilization', 'data-host': r.host, 'data-chip': r.chip},
          el('summary', {}, `${r.host} chip ${r.chip}`),
          utilizationTable(r.insight.kernel_profile, {'data-host': r.host, 'data-chip': r.chip}),
        ),
      );
  }

  // The time in named scopes inside the kernel over the pod, a table per scope line ("Pallas
  // Primitives", "Source Lines", ...), longest first, with its share of the kernel's time.
  function scopeTables(scopes, kernelTotalPs) {
    const {el, fmtPs, fmtPct, fmtCount} = P;
    const lines = new Map();
    for (const sc of scopes) {
      if (!lines.has(sc.line)) lines.set(sc.line, []);
      lines.get(sc.line).push(sc);
    }
    const out = [];
    for (const [line, rows] of lines) {
      const t = el(
        'table',
        {class: 'scopes', 'data-line': line},
        el(
          'tr',
          {},
          el('th', {}, 'Name'),
          ['Count', 'Total', 'Share'].map((h) => el('th', {class: 'num'}, h)),
        ),
      );
      for (const sc of rows) {
        t.append(
          el(
            'tr',
            {},
            el('td', {class: 'scope-name'}, sc.name),
            el('td', {class: 'num'}, fmtCount(sc.count)),
            el('td', {class: 'num'}, fmtPs(sc.total_ps)),
            el('td', {class: 'num'}, kernelTotalPs > 0 ? fmtPct(sc.total_ps / kernelTotalPs) : '-'),
          ),
        );
      }
      out.push(el('h3', {}, line), t);
    }
    return out;
  }

  // Why the kernel takes its time, as kernel profiling measured it (`podprof kernel`'s
  // breakdown): over the pod, per chip, and inside it by scope and source line.
  function profileSection(k) {
    const {el} = P;
    const pod = k.rollup.insight.kernel_profile;
    const chips = k.per_chip.filter((r) => r.insight.kernel_profile);
    const section = el('div', {id: 'profile'});
    if (pod) {
      section.append(
        el('p', {id: 'profile-pod'}, el('strong', {}, 'Over the pod: '), profileText(pod)),
      );
      if ((pod.rows || []).length) {
        section.append(
          el('h3', {}, "Utilization over the pod: XProf's Utilization Viewer rows"),
          el(
            'p',
            {class: 'muted'},
            'Each row is its achieved count against its peak, summed over the chips',
            (pod.dies || []).length
              ? ' and their dies; each die column is that die of every chip.'
              : '.',
          ),
          utilizationTable(pod, {id: 'profile-rows'}),
        );
      }
    }
    if (chips.length) {
      section.append(
        el('h3', {}, 'Per chip'),
        profileTable(k.per_chip),
        el('h3', {}, 'Utilization per chip'),
        ...chipUtilization(k.per_chip),
      );
    }
    if (!pod && chips.length === 0) {
      section.append(
        el(
          'p',
          {class: 'muted', id: 'profile-none'},
          'No performance counters were sampled inside this kernel: a capture started with ',
          '--kernel-profiling (TPU v7x) measures its units, clock and throttling per chip.',
        ),
      );
    }
    section.append(...scopeTables(k.scopes, k.rollup.total_ps));
    return [el('h2', {}, 'Kernel profiling'), section];
  }

  pages.kernel = async (name, main) => {
    const {el, api} = P;
    const q = new URLSearchParams(location.search);
    const args = new URLSearchParams();
    if (q.get('capture')) args.set('capture', q.get('capture'));
    if (q.get('module')) args.set('module', q.get('module'));
    const k = await api(`/api/v1/kernels/${enc(name)}?${args}`);
    const d = k.kernel;
    // program_id is a string: a 64-bit id that a JavaScript number would round.
    main.append(
      el('h1', {}, `Kernel ${d.op_name}`),
      el(
        'div',
        {class: 'muted'},
        `module ${d.module || '-'} · ${d.category} · program `,
        el('span', {id: 'program-id'}, d.program_id),
        d.custom_call_target ? ` · custom call ${d.custom_call_target}` : '',
        ' · in ',
        el('a', {href: `/captures/${enc(k.capture_id)}`}, k.capture_id),
      ),
      el('div', {class: 'card'}, k.rollup.insight.verdict_text || k.rollup.insight.verdict),
    );
    if (d.source) main.append(el('div', {}, 'source ', el('code', {}, d.source)));
    main.append(...profileSection(k), el('h2', {}, 'Per chip'), perChipTable(k.per_chip));
    main.append(
      ...textBlock('HLO', d.hlo_text),
      ...textBlock('MLIR', d.mlir),
      ...textBlock('Op path and stack', [d.tf_op, d.source_stack].filter(Boolean).join('\n')),
    );

    const h = await api(`/api/v1/kernels/${enc(name)}/history?module=${enc(d.module)}`);
    main.append(el('h2', {}, `History over ${h.points.length} captures`));
    const chart = el('div', {id: 'history'});
    main.append(chart);
    P.historyPoints = h.points;
    P.historyChart = historyChart(chart, h.points);
  };

  pages.diff = async (m, main) => {
    const {el, api, fmtPs} = P;
    const q = new URLSearchParams(location.search);
    const caps = (await api('/api/v1/captures?limit=200')).captures;
    const pick = (name, value) =>
      el(
        'select',
        {name},
        caps.map((c) =>
          el(
            'option',
            {value: c.capture, selected: c.capture === value},
            `${c.capture} (${c.status})`,
          ),
        ),
      );
    const form = el(
      'form',
      {class: 'row card', method: 'get', action: '/diff'},
      'baseline',
      pick('baseline', q.get('baseline') || (caps[1] || {}).capture),
      'candidate',
      pick('candidate', q.get('candidate') || (caps[0] || {}).capture),
      el(
        'label',
        {},
        'threshold ',
        el('input', {name: 'threshold', value: q.get('threshold') || '0.05', size: 5}),
      ),
      el('button', {type: 'submit'}, 'Compare'),
    );
    main.append(el('h1', {}, 'Diff'), form);
    if (!q.get('baseline') || !q.get('candidate')) return;
    const query = new URLSearchParams({
      baseline: q.get('baseline'),
      candidate: q.get('candidate'),
      threshold: q.get('threshold') || '0.05',
    });
    const r = await api(`/api/v1/diff?${query}`);
    main.append(
      el(
        'p',
        {id: 'diff-summary'},
        `${r.regression_count} regressions at a ${(r.threshold * 100).toFixed(0)}% threshold · `,
        el(
          'a',
          {
            href: `/api/v1/diff?${new URLSearchParams({
              baseline: r.baseline,
              candidate: r.candidate,
              format: 'csv',
            })}`,
          },
          'CSV',
        ),
      ),
    );
    const change = (d, v) =>
      !d.baseline ? 'new' : !d.candidate ? 'gone' : `${v >= 0 ? '+' : ''}${(v * 100).toFixed(1)}%`;
    const t = el(
      'table',
      {id: 'diff'},
      el(
        'tr',
        {},
        el('th', {}, 'Kernel'),
        el('th', {}, 'Module'),
        ['Base mean', 'Cand mean', 'Δmean', 'Base p99', 'Cand p99', 'Δp99'].map((h) =>
          el('th', {class: 'num'}, h),
        ),
        el('th', {}, ''),
      ),
    );
    for (const d of r.deltas) {
      t.append(
        el(
          'tr',
          {class: d.regression ? 'regression' : null},
          el(
            'td',
            {},
            el(
              'a',
              {
                href:
                  `/kernels/${enc(d.kernel)}` +
                  `?capture=${enc(r.candidate)}&module=${enc(d.module)}`,
              },
              d.kernel,
            ),
          ),
          el('td', {}, d.module || '-'),
          el('td', {class: 'num'}, d.baseline ? fmtPs(d.baseline.mean_ps) : '-'),
          el('td', {class: 'num'}, d.candidate ? fmtPs(d.candidate.mean_ps) : '-'),
          el('td', {class: 'num'}, change(d, d.mean_change)),
          el('td', {class: 'num'}, d.baseline ? fmtPs(d.baseline.p99_ps) : '-'),
          el('td', {class: 'num'}, d.candidate ? fmtPs(d.candidate.p99_ps) : '-'),
          el('td', {class: 'num'}, change(d, d.p99_change)),
          el('td', {}, d.regression ? 'REGRESSION' : ''),
        ),
      );
    }
    main.append(t);
  };
})();
