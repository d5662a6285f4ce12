// The pages: captures (live progress, a start form) and the diff of two captures, each drawn
// from the JSON API, and the helpers every page's tables share (P.ui: header rows, labels,
// kernel cells). The capture page is capture_page.js's, the kernel page kernel_page.js's;
// both load after this file.
(() => {
  'use strict';
  const P = (window.podprof = window.podprof || {});
  const pages = (P.pages = {});
  const enc = encodeURIComponent;

  // A table's header row in the shape every table here has: `text` columns, then `numbers`
  // (right-aligned, as their cells), then `tail` text columns.
  function headerRow(text, numbers, tail = []) {
    const th = (cls) => (h) => P.el('th', {class: cls}, h);
    return P.el('tr', {}, text.map(th()), numbers.map(th('num')), tail.map(th()));
  }
  // A table of `attrs` with that header row.
  const headedTable = (attrs, text, numbers, tail) =>
    P.el('table', attrs, headerRow(text, numbers, tail));

  // A capture's labels (an object of strings) as "k=v k2=v2".
  function labelsText(labels) {
    return Object.entries(labels || {})
      .map(([k, v]) => `${k}=${v}`)
      .join(' ');
  }

  // A kernel's name, linking to its page in `capture`, and its module: the first cells of the
  // kernel and diff tables.
  function kernelCells(kernel, module, capture) {
    const href = `/kernels/${enc(kernel)}?capture=${enc(capture)}&module=${enc(module)}`;
    return [P.el('td', {}, P.el('a', {href}, kernel)), P.el('td', {}, module || '-')];
  }

  P.ui = {headerRow, headedTable, labelsText, kernelCells};

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

  async function fillCaptures(table, compare) {
    const {el, api, fmtTime, fmtSpan, fmtCount} = P;
    const r = await api('/api/v1/captures?limit=200');
    table.replaceChildren(
      headerRow(
        ['', 'Capture', 'State', 'Started', 'Length'],
        ['Hosts', 'Chips', 'Kernels', 'Events'],
        ['Labels', 'Progress'],
      ),
    );
    for (const c of r.captures) {
      const row = el(
        'tr',
        {'data-capture': c.capture},
        el('td', {}, el('input', {type: 'checkbox', value: c.capture, onchange: compare})),
        el('td', {}, el('a', {href: `/captures/${enc(c.capture)}`}, c.capture)),
        el('td', {class: 'state'}, P.stateCell(c.status)),
        el('td', {}, fmtTime(c.start_ns)),
        el('td', {}, fmtSpan(c.start_ns, c.end_ns)),
        el('td', {class: 'num'}, fmtCount(c.hosts)),
        el('td', {class: 'num'}, fmtCount(c.chips)),
        el('td', {class: 'num'}, fmtCount(c.kernels)),
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

  pages.diff = async (m, main) => {
    const {el, api, fmtPs, fmtChange, fmtSignificant, countOf} = P;
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
        `${countOf(r.regression_count, 'regression')} at a `,
        `${fmtSignificant(r.threshold * 100, 6)}% threshold · `,
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
    // What an absent side means, as `podprof diff`'s ChangeCell says it.
    const change = (d, v) => (!d.baseline ? 'new' : !d.candidate ? 'gone' : fmtChange(v));
    const t = headedTable(
      {id: 'diff'},
      ['Kernel', 'Module'],
      ['Base mean', 'Cand mean', 'Δmean', 'Base p99', 'Cand p99', 'Δp99'],
      [''],
    );
    for (const d of r.deltas) {
      t.append(
        el(
          'tr',
          {class: d.regression ? 'regression' : null},
          kernelCells(d.kernel, d.module, r.candidate),
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
