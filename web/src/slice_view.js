// The capture page's slice view (#56): for a multi-slice capture, the cross-slice (DCN)
// verdict, a grid of slices x rendezvous instances (GET /api/v1/captures/{id}/dcn?cells=1)
// coloured by each slice's receivers' wait or its own lateness as a producer, the named late
// slice and slow link marked, and the links. A capture without cross-slice transfers shows
// nothing.
(() => {
  'use strict';
  const P = (window.podprof = window.podprof || {});
  const {LABEL_W, AXIS_H, BG} = P.canvas; // timeline_draw.js
  const {headedTable} = P.ui; // pages.js
  const MARK = '#c0392b';

  // What the grid can colour by: the cells' figure and the words for it.
  const MODES = {
    wait: {field: 'wait_ns', label: 'Receivers’ wait'},
    producer: {field: 'producer_ns', label: 'Producer’s own lateness'},
  };

  // The answer's culprits, as the verdict named them: the late slices and the slow links.
  function namedOf(dcn) {
    return {
      slices: (dcn.producers || []).filter((p) => p.named).map((p) => p.slice),
      links: (dcn.links || []).filter((l) => l.named),
    };
  }

  // Slices down, instances across, on a canvas (up to 64 x 2000 cells); a named slice's row,
  // and the row of a slow link's receiving slice, outlined in red with the reason beside it.
  class SliceGrid {
    constructor(container, cells, named) {
      const {el} = P;
      this.cells = cells;
      this.named = named;
      // Each row's mark, by slice: why it is outlined.
      this.marks = new Map();
      for (const s of named.slices) this.marks.set(s, 'late producer');
      for (const l of named.links) {
        const why = `slow link ${l.src_slice}→${l.dst_slice}`;
        const was = this.marks.get(l.dst_slice);
        this.marks.set(l.dst_slice, was ? `${was}; ${why}` : why);
      }
      this.mode = named.slices.length && !named.links.length ? 'producer' : 'wait';
      this.canvas = el('canvas', {
        id: 'slice-grid',
        'data-slices': cells.slices.length,
        'data-instances': cells.instances.length,
        'data-marked': [...this.marks.keys()].join(','),
      });
      this.tip = el('div', {class: 'tooltip'});
      container.append(el('div', {class: 'timeline-wrap'}, this.canvas, this.tip));
      this.canvas.addEventListener('mousemove', (ev) => this.hover(ev));
      this.canvas.addEventListener('mouseleave', () => {
        this.tip.style.display = 'none';
      });
      this.draw();
    }

    setMode(mode) {
      this.mode = mode;
      this.canvas.dataset.mode = mode;
      this.draw();
    }

    cell() {
      const n = this.cells.instances.length || 1;
      const h = Math.max(6, Math.min(18, Math.floor(480 / Math.max(1, this.cells.slices.length))));
      return {w: ((this.canvas.clientWidth || 1000) - LABEL_W) / n, h};
    }

    draw() {
      const d = this.cells,
        rows = d[MODES[this.mode].field],
        {w, h} = this.cell();
      const cssW = this.canvas.clientWidth || 1000,
        cssH = AXIS_H + d.slices.length * h + 4;
      const dpr = window.devicePixelRatio || 1;
      this.canvas.width = Math.round(cssW * dpr);
      this.canvas.height = Math.round(cssH * dpr);
      this.canvas.style.height = `${cssH}px`;
      this.canvas.dataset.mode = this.mode;
      const c = this.canvas.getContext('2d');
      c.setTransform(dpr, 0, 0, dpr, 0, 0);
      c.fillStyle = BG;
      c.fillRect(0, 0, cssW, cssH);
      let max = 0;
      for (const row of rows) for (const v of row) max = Math.max(max, v);
      c.font = '10px system-ui, sans-serif';
      c.fillStyle = '#6b7383';
      c.fillText(`instances 1–${d.instances.length}; darkest ${P.fmtNs(max)}`, LABEL_W, AXIS_H - 8);
      rows.forEach((row, i) => {
        const y = AXIS_H + i * h;
        row.forEach((v, k) => {
          const f = max > 0 ? v / max : 0; // white to red, as the waits heatmap
          const g = 255 - Math.round(f * 215);
          c.fillStyle = `rgb(255,${g},${g})`;
          c.fillRect(LABEL_W + k * w, y, Math.max(w - (w > 3 ? 1 : 0), 0.5), h - 1);
        });
      });
      d.slices.forEach((s, i) => {
        const y = AXIS_H + i * h;
        const mark = this.marks.get(s);
        c.fillStyle = mark ? MARK : '#1d2330';
        c.font = `${mark ? 'bold ' : ''}${Math.min(11, h)}px system-ui, sans-serif`;
        c.fillText(`slice ${s}${mark ? ` · ${mark}` : ''}`, 4, y + h - 3, LABEL_W - 8);
        if (mark) {
          c.strokeStyle = MARK;
          c.lineWidth = 2;
          c.strokeRect(LABEL_W + 1, y + 1, cssW - LABEL_W - 2, h - 2);
        }
      });
    }

    hover(ev) {
      const r = this.canvas.getBoundingClientRect(),
        x = ev.clientX - r.left,
        y = ev.clientY - r.top;
      const {w, h} = this.cell(),
        i = Math.floor((y - AXIS_H) / h),
        k = Math.floor((x - LABEL_W) / w);
      const d = this.cells;
      if (x < LABEL_W || i < 0 || i >= d.slices.length || k < 0 || k >= d.instances.length) {
        this.tip.style.display = 'none';
        return;
      }
      const inst = d.instances[k];
      const mark = this.marks.get(d.slices[i]);
      this.tip.textContent =
        `slice ${d.slices[i]}, ${inst.rendezvous} step ${inst.step}\n` +
        `its receivers waited ${P.fmtNs(d.wait_ns[i][k])}\n` +
        `it sent late by ${P.fmtNs(d.producer_ns[i][k])} of its own` +
        (mark ? `\nnamed: ${mark}` : '');
      this.tip.style.display = 'block';
      this.tip.style.left = `${x + 12}px`;
      this.tip.style.top = `${y + 12}px`;
    }
  }

  // The links as `podprof dcn` lists them; a named link's row marked.
  function linksTable(links) {
    const {el, fmtNs, fmtCount} = P;
    const t = headedTable(
      {id: 'dcn-links'},
      ['Link'],
      ['Transfers', 'Median transit', 'Network excess', 'Caused wait', 'Worst in', 'Of', 'P'],
      ['Named'],
    );
    for (const l of links) {
      t.append(
        el(
          'tr',
          {class: l.named ? 'culprit' : null, 'data-link': l.link},
          el('td', {}, `${l.src_slice} → ${l.dst_slice}`),
          el('td', {class: 'num'}, fmtCount(l.transfers)),
          el('td', {class: 'num'}, fmtNs(l.median_transit_ns)),
          el('td', {class: 'num'}, fmtNs(l.excess_ns)),
          el('td', {class: 'num'}, fmtNs(l.caused_ns)),
          el('td', {class: 'num'}, fmtCount(l.times_last)),
          el('td', {class: 'num'}, fmtCount(l.instances)),
          el('td', {class: 'num'}, Number(l.p_value).toPrecision(2)),
          el('td', {}, l.named ? 'slow link' : 'no'),
        ),
      );
    }
    return t;
  }

  // Draws the view of `dcn` (the /dcn answer with cells) into `container`; nothing for a
  // capture without cross-slice transfers. Returns the grid, or null.
  function drawSliceView(container, dcn) {
    const {el, countOf} = P;
    const cells = dcn.cells;
    if (!cells || !cells.slices.length || !cells.instances.length) return null;
    const named = namedOf(dcn);
    const culprit = named.slices.length > 0 || named.links.length > 0;
    const modes = el('span', {class: 'legend'}, 'Colour by: ');
    const note = [];
    if (cells.instances_left_out > 0) {
      note.push(
        `the first ${countOf(cells.instances.length, 'instance')} of ` +
          `${cells.instances.length + cells.instances_left_out}`,
      );
    }
    if (cells.slices_left_out > 0) {
      note.push(`${countOf(cells.slices_left_out, 'slice')} more not shown`);
    }
    const gridAt = el('div');
    container.append(
      el('h2', {}, 'Slices over DCN'),
      el(
        'div',
        {id: 'dcn-verdict', class: culprit ? 'straggler' : null},
        `${dcn.verdict.charAt(0).toUpperCase()}${dcn.verdict.slice(1)}`,
      ),
      el(
        'div',
        {class: 'legend'},
        `${countOf(dcn.transfers, 'transfer')} between ${countOf(dcn.slices, 'slice')}, ` +
          `expected transit ${P.fmtNs(dcn.expected_transit_ns)}` +
          (dcn.runtime_network
            ? `, the network's part from the runtime's own latency beyond ` +
              `${dcn.runtime_budget ? 'its budget' : "the healthiest link's"} ` +
              `${P.fmtNs(dcn.expected_runtime_latency_ns)}`
            : '') +
          `; a row per slice, a column ` +
          `per rendezvous instance in time order, the darker the longer` +
          (note.length ? ` (${note.join('; ')})` : '') +
          '. ',
        modes,
      ),
      gridAt,
      linksTable(dcn.links || []),
    );
    const grid = new SliceGrid(gridAt, cells, named);
    for (const [key, m] of Object.entries(MODES)) {
      modes.append(
        el(
          'label',
          {class: 'legend-entry'},
          el('input', {
            type: 'radio',
            name: 'slice-mode',
            value: key,
            checked: grid.mode === key,
            onchange: () => grid.setMode(key),
          }),
          m.label,
        ),
        ' ',
      );
    }
    return grid;
  }

  // Asks for the capture's cross-slice answer and draws it into `container` (empty when there
  // is none); an error is shown there.
  async function loadSliceView(id, container) {
    try {
      const dcn = await P.api(`/api/v1/captures/${encodeURIComponent(id)}/dcn?cells=1`);
      P.sliceView = drawSliceView(container, dcn);
    } catch (err) {
      P.showError(container, err);
    }
  }

  P.loadSliceView = loadSliceView;
})();
