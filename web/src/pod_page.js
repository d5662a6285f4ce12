// The pod page (/pod): the agents' telemetry over the last minutes as heatmaps, a column per
// stored interval: a row per chip for step time and duty cycle, a row per host for its
// collectives' mean time and, in a multi-slice job, its DCN transfer latency p50 (the runtime
// reports those per host), with the snapshots taken in that
// time marked where they end; the triggers' last events; and, for an operator, a button
// that takes a snapshot of every host now.
(() => {
  'use strict';
  const P = (window.podprof = window.podprof || {});
  const enc = encodeURIComponent;
  const LABEL_W = 120,
    AXIS_H = 18;

  // A mean is no value where nothing it averages ended.
  const COUNT_OF = {
    step_mean_us: 'steps',
    collective_mean_us: 'collectives',
    dcn_latency_p50_us: 'dcn_transfers',
  };

  // The rows as chips (host/chip, sorted; hosts with `byHost`) by columns (interval ends,
  // sorted), and the value of `field` in each cell (null where nothing was reported).
  function grid(rows, field, byHost) {
    const key = (r) => (byHost ? r.host : `${r.host}/${r.chip}`);
    const chips = [...new Set(rows.map(key))].sort((a, b) =>
      a.localeCompare(b, undefined, {numeric: true}),
    );
    const times = [...new Set(rows.map((r) => r.time_ns))].sort((a, b) => a - b);
    const ci = new Map(chips.map((c, i) => [c, i])),
      ti = new Map(times.map((t, i) => [t, i]));
    const cells = chips.map(() => times.map(() => null));
    for (const r of rows) {
      const v = r[field];
      if (v >= 0 && !(COUNT_OF[field] && r[COUNT_OF[field]] === 0)) {
        cells[ci.get(key(r))][ti.get(r.time_ns)] = v;
      }
    }
    return {chips, times, cells};
  }

  // A heatmap of `g` on a canvas: darker is more (step time) or less (duty cycle, `invert`);
  // grey where a chip did not report; a red line at each snapshot's end. `scale`: {minSpan} (a
  // fraction of the middle value) or {fixed: [lo, hi]}.
  function heatmap(id, title, g, fmt, invert, snapshots, scale) {
    const {el} = P;
    const canvas = el('canvas', {id});
    const h = Math.max(3, Math.min(14, Math.floor(480 / Math.max(1, g.chips.length))));
    const w = 1000,
      cssH = AXIS_H + g.chips.length * h + 2;
    const values = g.cells.flat().filter((v) => v !== null);
    const least = Math.min(...values),
      most = Math.max(...values);
    // The scale spans at least `minSpan` of the middle value (or the fixed range given), so that
    // a healthy pod's noise of a percent reads as the even colour it is.
    let [lo, hi] = scale.fixed || [least, most];
    const mid = (lo + hi) / 2;
    if (hi - lo < (scale.minSpan || 0) * mid) {
      [lo, hi] = [mid * (1 - scale.minSpan / 2), mid * (1 + scale.minSpan / 2)];
    }
    canvas.width = w;
    canvas.height = cssH;
    canvas.dataset.min = String(least);
    canvas.dataset.max = String(most);
    canvas.dataset.rows = String(g.chips.length);
    const c = canvas.getContext('2d');
    c.fillStyle = '#fff';
    c.fillRect(0, 0, w, cssH);
    c.font = '10px system-ui, sans-serif';
    c.fillStyle = '#6b7383';
    const [light, dark] = invert ? [hi, lo] : [lo, hi];
    c.fillText(
      `${title} ${fmt(least)} to ${fmt(most)}; scale ${fmt(light)} (lightest) to ${fmt(dark)} (darkest)`,
      LABEL_W,
      AXIS_H - 6,
    );
    // The time the columns cover, at the right of the legend line.
    const covered = `${P.fmtTime(g.times[0])} to ${P.fmtTime(g.times[g.times.length - 1])}`;
    c.textAlign = 'right';
    c.fillText(covered, w - 2, AXIS_H - 6);
    c.textAlign = 'left';
    const cw = (w - LABEL_W) / Math.max(1, g.times.length);
    g.chips.forEach((chip, i) => {
      const y = AXIS_H + i * h;
      if (h >= 8) {
        c.fillStyle = '#333';
        c.fillText(chip, 2, y + h - 2);
      }
      g.cells[i].forEach((v, t) => {
        let shade = 0.92;
        if (v !== null) {
          const f = hi > lo ? Math.min(1, Math.max(0, (v - lo) / (hi - lo))) : 0;
          shade = 0.95 - 0.8 * (invert ? 1 - f : f);
        }
        const g8 = Math.round(255 * shade);
        c.fillStyle = v === null ? '#ddd' : `rgb(${g8}, ${g8}, 255)`;
        c.fillRect(LABEL_W + t * cw, y, Math.ceil(cw), h - 1);
      });
    });
    // Snapshots: where each one's window ends (the trigger's instant). One taken after the last
    // stored interval (the telemetry lags by a store interval) sits at the right edge.
    const span = g.times[1] - g.times[0] || 1e9;
    const first = g.times[0] - span,
      last = g.times[g.times.length - 1];
    for (const s of snapshots) {
      const end = Math.min(Number(s.end_ns), last);
      if (end < first || Number(s.end_ns) > last + 10 * span) continue;
      const x = LABEL_W + ((end - first) / (last - first)) * (w - LABEL_W);
      c.fillStyle = '#d00';
      c.fillRect(Math.min(w - 2, Math.round(x) - 1), AXIS_H - 4, 2, cssH - AXIS_H + 4);
    }
    return canvas;
  }

  // Each snapshot with its trigger and reason, and a link to its diff against the last complete
  // capture that ended before it began (`captures`, newest first): what changed since.
  function snapshotList(snapshots, captures) {
    const {el, fmtTime} = P;
    const list = el('ul', {id: 'snapshots'});
    for (const s of snapshots) {
      const l = s.labels || {};
      const good = captures.find(
        (c) => c.status === 'complete' && c.capture !== s.capture && c.end_ns <= s.start_ns,
      );
      list.append(
        el(
          'li',
          {},
          el('a', {href: `/captures/${enc(s.capture)}`}, s.capture),
          ` ${fmtTime(s.end_ns)} `,
          el('strong', {}, l.trigger || 'snapshot'),
          l.reason ? `: ${l.reason}` : '',
          ` (${s.status})`,
          good
            ? el(
                'a',
                {
                  class: 'diff',
                  href: `/diff?baseline=${enc(good.capture)}&candidate=${enc(s.capture)}`,
                },
                ` diff against ${good.capture}`,
              )
            : '',
        ),
      );
    }
    if (!snapshots.length) list.append(el('li', {class: 'muted'}, 'No snapshots in this time.'));
    return list;
  }

  function snapshotButton(after) {
    const {el, api} = P;
    const msg = el('span', {class: 'muted', id: 'snapshot-message'});
    const button = el('button', {id: 'snapshot-now'}, 'Snapshot every host now');
    button.addEventListener('click', async () => {
      try {
        const r = await api('/api/v1/snapshots', {
          method: 'POST',
          headers: {'Content-Type': 'application/json'},
          body: JSON.stringify({reason: 'from the pod page'}),
        });
        msg.textContent = `snapshot ${r.capture} of ${r.hosts.length} hosts`;
        after();
      } catch (err) {
        msg.textContent = String(err.message || err);
      }
    });
    return el('div', {class: 'card'}, button, ' ', msg);
  }

  P.pages.pod = async (m, main) => {
    const {el, api} = P;
    const since = new URLSearchParams(location.search).get('since') || '30m';
    const [ui, tele, caps, trig] = await Promise.all([
      api('/api/v1/ui'),
      api(`/api/v1/telemetry?since=${enc(since)}&limit=100000`),
      api('/api/v1/captures?limit=1000'),
      api('/api/v1/triggers'),
    ]);
    main.append(el('h1', {}, `Pod health, the last ${since}`));
    if (ui.operator) main.append(snapshotButton(() => setTimeout(() => location.reload(), 1500)));
    const rows = tele.telemetry;
    if (!rows.length) {
      main.append(
        el(
          'p',
          {class: 'muted', id: 'no-telemetry'},
          'No telemetry in this time: agents send it each [telemetry] interval.',
        ),
      );
      return;
    }
    const start = Math.min(...rows.map((r) => r.time_ns - r.interval_ns));
    const snapshots = caps.captures.filter((c) => c.source === 'snapshot' && c.end_ns >= start);
    const step = grid(rows, 'step_mean_us'),
      duty = grid(rows, 'duty_cycle_percent'),
      coll = grid(rows, 'collective_mean_us', true),
      dcn = grid(rows, 'dcn_latency_p50_us', true);
    const ms = (us) => `${(us / 1000).toFixed(2)} ms`,
      pct = (v) => `${v.toFixed(1)}%`;
    main.append(
      el('h2', {}, 'Step time per chip'),
      heatmap('step-heatmap', 'mean step time', step, ms, false, snapshots, {minSpan: 0.2}),
      el('h2', {}, 'Duty cycle per chip'),
      heatmap('duty-heatmap', 'duty cycle', duty, pct, true, snapshots, {
        fixed: [0, 100],
      }),
    );
    // A runtime without the collective metric (one slice, or not libtpu) has no such row.
    if (coll.cells.flat().some((v) => v !== null)) {
      main.append(
        el('h2', {}, 'Collective time per host'),
        heatmap('collective-heatmap', 'mean collective time', coll, ms, false, snapshots, {
          minSpan: 0.2,
        }),
      );
    }
    // Only a multi-slice job's hosts have DCN transfers; a slower link into a slice shows as its
    // hosts' rows turning hot (the dcn trigger's snapshots are marked with the others).
    if (dcn.cells.flat().some((v) => v !== null)) {
      const us = (v) => `${v.toFixed(1)} us`;
      main.append(
        el('h2', {}, 'DCN transfer latency per host (p50)'),
        heatmap('dcn-heatmap', 'DCN transfer latency p50', dcn, us, false, snapshots, {
          minSpan: 0.2,
        }),
      );
    }
    main.append(
      el('h2', {}, 'Snapshots'),
      snapshotList(snapshots, caps.captures),
      el('h2', {}, 'Triggers'),
    );
    const events = el('ul', {id: 'trigger-events'});
    for (const e of trig.events.slice().reverse()) {
      events.append(
        el('li', {}, `${P.fmtTime(e.time_ns)} ${e.trigger}: ${e.reason} → ${e.outcome}`),
      );
    }
    if (!trig.events.length) events.append(el('li', {class: 'muted'}, 'No trigger has held.'));
    main.append(events);
  };
})();
