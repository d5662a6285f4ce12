// The kernel page: the answer first (the verdict, where inside the kernel its time goes, the
// worst chips), then the kernel-profiling tables folded (XProf's Utilization Viewer rows over
// the pod, per chip and die, every scope), the per-chip rows, its texts (HLO, MLIR, op path)
// and the history chart over captures; drawn from the JSON API.
(() => {
  'use strict';
  const P = (window.podprof = window.podprof || {});
  const {headerRow, headedTable} = P.ui; // pages.js
  const enc = encodeURIComponent;

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

  // A chip's row of a per-chip table: its host and chip, then `cells`; data-host and
  // data-chip name it for the tests.
  const chipRow = (r, ...cells) =>
    P.el(
      'tr',
      {'data-host': r.host, 'data-chip': r.chip},
      P.el('td', {}, r.host),
      P.el('td', {class: 'num'}, r.chip),
      ...cells, // spread: el() flattens its children one level only
    );

  function perChipTable(rows) {
    const {el, fmtPs, fmtPct, fmtCount} = P;
    const num = (v) => el('td', {class: 'num'}, v);
    const t = headedTable(
      {id: 'per-chip'},
      ['Host'],
      ['Chip', 'Count', 'Total', 'Mean', 'P50', 'P99', 'Max', 'MXU', 'Throttle', 'Wait'],
      ['Verdict'],
    );
    for (const r of byTime(rows)) {
      const p = r.insight.kernel_profile;
      t.append(
        chipRow(
          r,
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

  // The share of clock cycles the power manager skipped, where it counted them ("0.0%" for
  // none); '-' elsewhere: nothing else measures throttling (report::ThrottledCell).
  const throttledCell = (p) => (p && p.power_manager ? P.fmtShare(p.throttled) : '-');

  // "units busy: MXU 12.0%, ... · power manager: 2.6% of cycles skipped (die 0 ..., die 1 ...) ·
  // 55.0% of its time in sync waits", `podprof kernel`'s lines for one profile.
  function profileText(p) {
    const {fmtPct, fmtShare} = P;
    const units = PROFILE_UNITS.filter(([u]) => p.units[u] !== undefined).map(
      ([u, n]) => `${n} ${fmtShare(p.units[u])}`,
    );
    const parts = [`units busy: ${units.join(', ') || '-'}`];
    if (p.power_manager) {
      const dies = (p.dies || [])
        .filter((d) => d.power_manager)
        .map((d) => `die ${d.die} ${fmtShare(d.throttled)}`);
      const perDie = dies.length ? ` (${dies.join(', ')})` : '';
      parts.push(`power manager: ${fmtShare(p.throttled)} of cycles skipped${perDie}`);
    }
    if (p.sync_wait > 0) parts.push(`${fmtPct(p.sync_wait)} of its time in sync waits`);
    if (p.missing) parts.push(`no utilization figures: ${p.missing}`);
    for (const d of p.dies || [])
      if (d.missing) parts.push(`die ${d.die}: ${d.missing}, no figures`);
    return parts.join(' · ');
  }

  // A Utilization Viewer count (cycles, instructions, bytes) to four significant digits,
  // "1.235e+07", as `podprof kernel` writes it (its CountCell).
  const fourDigits = (v) => P.fmtSignificant(v, 4);

  // XProf's Utilization Viewer rows of a profile, as `podprof kernel` prints them: pooled over
  // the dies (each row's achieved and peak summed), and each die's beside them, '-' where a die
  // lacks the row.
  function utilizationTable(p, attrs) {
    const {el, fmtShare} = P;
    const num = (v) => el('td', {class: 'num'}, v);
    const share = (r) => fmtShare(r.peak > 0 ? r.achieved / r.peak : 0);
    const dies = (p.dies || []).filter((d) => !d.missing);
    const head = headerRow(['Row', 'Unit'], ['Achieved', 'Peak', 'Share']);
    head.append(
      ...dies.flatMap((d) =>
        ['Achieved', 'Peak', 'Share'].map((h) =>
          el('th', {class: 'num', 'data-die': d.die}, `Die ${d.die} ${h}`),
        ),
      ),
    );
    const t = el('table', Object.assign({class: 'utilization'}, attrs), head);
    for (const r of p.rows || []) {
      // flatMap: el() flattens its children one level only.
      const cells = dies.flatMap((d) => {
        const dr = (d.rows || []).find((x) => x.name === r.name);
        return dr
          ? [
              num(fourDigits(dr.achieved)),
              num(fourDigits(dr.peak)),
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
          num(fourDigits(r.achieved)),
          num(fourDigits(r.peak)),
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
    const {el, fmtPct, fmtShare} = P;
    const num = (v) => el('td', {class: 'num'}, v);
    const t = headedTable(
      {id: 'profile-chips'},
      ['Host'],
      ['Chip', ...PROFILE_UNITS.map(([, n]) => n), 'Cycles', 'Throttled', 'Sync wait'],
      ['Cause'],
    );
    for (const r of byTime(rows)) {
      const p = r.insight.kernel_profile;
      if (!p) continue;
      t.append(
        chipRow(
          r,
          PROFILE_UNITS.map(([u]) => num(fmtShare(p.units[u]))),
          num(p.missing ? '-' : fourDigits(p.cycles)),
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
            PROFILE_UNITS.map(([u]) => num(fmtShare((d.units || {})[u]))),
            num(d.missing ? '-' : fourDigits(d.cycles)),
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
      const t = headedTable(
        {class: 'scopes', 'data-line': line},
        ['Name'],
        ['Count', 'Total', 'Share'],
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

  // Every table kernel profiling measured (`podprof kernel --full`'s breakdown): XProf's
  // Utilization Viewer rows over the pod, each chip and die, and the time inside the kernel by
  // every scope line. Folded in a closed <details>: with 23 rows over the pod, 3 per chip and
  // die and a table per scope line they run to thousands of pixels, and the answer they hold is
  // what the lead above them says. Empty when there is nothing to fold.
  function foldedTables(k) {
    const {el} = P;
    const pod = k.rollup.insight.kernel_profile;
    const chips = k.per_chip.filter((r) => r.insight.kernel_profile);
    const section = el('div', {id: 'profile'});
    if (pod && (pod.rows || []).length) {
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
    if (chips.length) {
      section.append(
        el('h3', {}, 'Kernel profiling per chip and die'),
        profileTable(k.per_chip),
        el('h3', {}, 'Utilization per chip'),
        ...chipUtilization(k.per_chip),
      );
    }
    section.append(...scopeTables(k.scopes, k.rollup.total_ps));
    if (!section.childElementCount) return [];
    const lines = new Set(k.scopes.map((sc) => sc.line)).size;
    const what = [
      pod && (pod.rows || []).length ? `XProf's Utilization Viewer rows (${pod.rows.length})` : '',
      chips.length ? `per chip and die (${P.countOf(chips.length, 'chip')})` : '',
      lines ? `time by scope (${P.countOf(lines, 'line')})` : '',
    ].filter(Boolean);
    return [
      el(
        'details',
        {id: 'kernel-tables'},
        el('summary', {}, `All tables: ${what.join(', ')}`),
        section,
      ),
    ];
  }

  // The `limit` longest scopes of one scope line ("Source Lines", "Pallas Primitives"), each
  // with its share of the kernel's time: where inside the kernel its time goes. Null when the
  // capture has none of that line.
  function hotTable(id, title, line, scopes, kernelTotalPs, limit = 5) {
    const {el, fmtPs, fmtShare} = P;
    const rows = scopes.filter((sc) => sc.line === line).slice(0, limit);
    if (!rows.length) return null;
    const t = headedTable({id, class: 'hot'}, [title], ['Share', 'Total']);
    for (const sc of rows) {
      t.append(
        el(
          'tr',
          {},
          el('td', {class: 'scope-name'}, sc.name),
          el('td', {class: 'num'}, kernelTotalPs > 0 ? fmtShare(sc.total_ps / kernelTotalPs) : '-'),
          el('td', {class: 'num'}, fmtPs(sc.total_ps)),
        ),
      );
    }
    return t;
  }

  // The median of `values` (sorted copy); 0 for none.
  function median(values) {
    const v = [...values].sort((a, b) => a - b);
    if (!v.length) return 0;
    const m = Math.floor(v.length / 2);
    return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
  }

  // The chips that spent the most time in the kernel, with how far each one's mean execution
  // is past the median chip's and its own verdict (which says what is wrong with it: throttled,
  // waiting); the full list is the per-chip table further down.
  function worstChips(rows, limit = 3) {
    const {el, fmtPs, fmtChange} = P;
    const num = (v) => el('td', {class: 'num'}, v);
    const mid = median(rows.map((r) => r.mean_ps));
    const t = headedTable(
      {id: 'worst-chips'},
      ['Host'],
      ['Chip', 'Total', 'Mean', 'vs median', 'MXU', 'Throttle'],
      ['Verdict'],
    );
    for (const r of byTime(rows).slice(0, limit)) {
      t.append(
        chipRow(
          r,
          num(fmtPs(r.total_ps)),
          num(fmtPs(r.mean_ps)),
          num(mid > 0 ? fmtChange(r.mean_ps / mid - 1) : '-'),
          num(P.fmtPct(mxuBusy(r.insight))),
          num(throttledCell(r.insight.kernel_profile)),
          el('td', {}, r.insight.verdict_text || verdictCell(r.insight)),
        ),
      );
    }
    return t;
  }

  // What the page leads with, all on the first screen: the verdict, the pod's units in one
  // line, where inside the kernel the time goes (source lines, Pallas primitives) and the worst
  // chips. A kernel without kernel profiling says how to get it instead of the scopes.
  function lead(k, d) {
    const {el} = P;
    const ins = k.rollup.insight;
    const pod = ins.kernel_profile;
    const out = [
      el(
        'div',
        {class: 'card verdict', id: 'verdict'},
        el('div', {class: 'verdict-text'}, ins.verdict_text || ins.verdict),
        el('div', {class: 'muted'}, `verdict: ${ins.verdict}`),
      ),
    ];
    if (pod) {
      out.push(el('p', {id: 'profile-pod'}, el('strong', {}, 'Over the pod: '), profileText(pod)));
    }
    const total = k.rollup.total_ps;
    const hot = [
      hotTable('hot-source', 'Source line', 'Source Lines', k.scopes, total),
      hotTable('hot-primitives', 'Pallas primitive', 'Pallas Primitives', k.scopes, total),
    ].filter(Boolean);
    const where = el('section', {class: 'lead-part'}, el('h2', {}, 'Where its time goes'));
    if (d.source) where.append(el('div', {}, 'called from ', el('code', {}, d.source)));
    if (hot.length) {
      where.append(el('div', {class: 'hot-tables'}, hot));
    } else if (!pod && !k.per_chip.some((r) => r.insight.kernel_profile)) {
      where.append(
        el(
          'p',
          {class: 'muted', id: 'profile-none'},
          'No performance counters were sampled inside this kernel: a capture started with ',
          '--kernel-profiling (TPU v7x) measures its units, clock and throttling per chip.',
        ),
      );
    }
    // One chip has no worst: its row is the per-chip table's only one.
    const chips =
      k.per_chip.length > 1
        ? el('section', {class: 'lead-part'}, el('h2', {}, 'Worst chips'), worstChips(k.per_chip))
        : '';
    out.push(el('div', {class: 'kernel-lead'}, where, chips));
    return out;
  }

  P.pages.kernel = async (name, main) => {
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
    );
    main.append(
      ...lead(k, d),
      ...foldedTables(k),
      el('h2', {}, 'Per chip'),
      perChipTable(k.per_chip),
    );
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
})();
