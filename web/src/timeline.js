// The pod timeline: hosts x chips as tracks, drawn on a canvas by our own code (TrackCanvas,
// timeline_draw.js, paints them). It asks the aggregator for the visible window at the
// canvas's width after every zoom or pan, so it never holds more than a screen of detail:
// slices a pixel wide or more, per-pixel busy fractions below that. Here: loading, the counter
// menu, the legend, hovering, zoom and pan.
(() => {
  'use strict';
  const P = (window.podprof = window.podprof || {});
  const {LABEL_W, ROW_H, COUNTER_COLOR, kernelPixel, kernelColor} = P.canvas; // timeline_draw.js

  // Kernels the legend names: the ones that fill most of the window.
  const LEGEND_KERNELS = 10;

  class PodTimeline extends P.canvas.TrackCanvas {
    constructor(container, capture, straggler) {
      super();
      const {el} = P;
      this.capture = capture;
      this.length = Math.max(1, capture.end_ns - capture.start_ns);
      this.view = {from: 0, to: this.length};
      this.straggler = straggler;
      this.counter = null; // chosen once the first response lists the counters
      this.select = el('select', {
        id: 'counter-select',
        onchange: () => {
          this.counter = this.select.value;
          this.load();
        },
      });
      this.canvas = el('canvas', {id: 'timeline-canvas'});
      this.tip = el('div', {class: 'tooltip'});
      this.status = el('span', {class: 'muted', id: 'timeline-status'});
      // The counter strip's scale (0 at its bottom, the highest value in view at its top) and
      // what each colour means: read as text, not guessed from the canvas.
      this.scale = el('span', {id: 'counter-scale'});
      this.legend = el('div', {class: 'legend timeline-legend', id: 'timeline-legend'});
      this.axis = [];
      this.spacer = el('div', {class: 'timeline-spacer'});
      this.scroller = el('div', {class: 'timeline-scroll'}, this.canvas, this.spacer);
      this.scroller.addEventListener(
        'scroll',
        () => {
          if (this.data) this.draw();
        },
        {passive: true},
      );
      container.append(
        el(
          'div',
          {class: 'row legend'},
          el('span', {}, 'counter under each chip: ', this.select, ' ', this.scale),
          this.status,
        ),
        this.legend,
        el('div', {class: 'timeline-wrap'}, this.scroller, this.tip),
      );
      this.ctx = this.canvas.getContext('2d');
      this.listen();
      this.pending = null;
      this.loads = 0;
      this.scrollTop = 0;
      this.measure();
      // Later width changes arrive after layout, never forcing one in the middle of a draw.
      new ResizeObserver(() => {
        const before = this.pw;
        if (this.data && this.measure() !== before) this.changed();
      }).observe(this.canvas);
    }

    async load() {
      const width = this.plotWidth();
      const q = new URLSearchParams({
        from_ns: Math.floor(this.view.from),
        to_ns: Math.ceil(this.view.to),
        width,
      });
      // The first load lets the aggregator pick the counter (the MXU's busy fraction up to 64
      // chips, none past) and lists the others for the menu.
      const first = this.counter === null;
      q.set('counters', first ? 'default' : this.counter);
      if (first) q.set('waits', '1'); // the heatmap's data, from the same pass over the hosts
      const seq = ++this.loads;
      this.status.textContent = ' loading…';
      const data = await P.api(
        `/api/v1/captures/${encodeURIComponent(this.capture.capture)}/timeline?${q}`,
      );
      performance.mark('timeline-parsed'); // marks: where a page's time goes (bench_web_page)
      if (seq !== this.loads) return; // a newer window was asked for meanwhile
      if (this.counter === null) {
        this.waits = data.waits;
        delete data.waits;
        this.select.replaceChildren(
          P.el('option', {value: ''}, 'none'),
          ...data.counters.map((c) => P.el('option', {value: c}, c)),
        );
        this.counter = data.counters_shown[0] || '';
        this.select.value = this.counter;
      }
      this.data = data;
      this.colors = data.kernels.map((k) => kernelColor(k.name)); // parsed once, not per rect
      this.pixels = data.kernels.map((k) => kernelPixel(k.name));
      this.draw();
      this.updateLegend();
      performance.mark('timeline-drawn');
      const {from, to} = this.view;
      this.status.textContent = ` ${P.fmtNs(from)} – ${P.fmtNs(to)} of ${P.fmtNs(this.length)}`;
    }

    setStraggler(s) {
      this.straggler = s;
      if (this.data) {
        this.draw();
        this.updateLegend();
      }
    }

    // The legend: the colours of the kernels that fill most of the window (busy time summed
    // over the chips), then what the other marks mean.
    updateLegend() {
      const {el} = P,
        d = this.data;
      const busy = new Float64Array(d.kernels.length);
      for (const t of d.tracks) {
        for (let k = 0; k < t.slices.length; k += 4) busy[t.slices[k + 2]] += t.slices[k + 1];
        for (let b = 0; b < t.bins.length; b += 3)
          busy[t.bins[b + 2]] += (t.bins[b + 1] * d.ns_per_px) / 1000;
      }
      const seen = [...busy.keys()].filter((i) => busy[i] > 0).sort((a, b) => busy[b] - busy[a]);
      const entry = (swatch, text, attrs) =>
        el('span', {class: 'legend-entry', ...attrs}, swatch, text);
      const entries = seen.slice(0, LEGEND_KERNELS).map((i) =>
        entry(
          el('span', {class: 'swatch', style: `background:${this.colors[i]}`}),
          d.kernels[i].name,
          {
            'data-kernel': d.kernels[i].name,
            title: `${d.kernels[i].name} (${d.kernels[i].module})`,
          },
        ),
      );
      if (seen.length > LEGEND_KERNELS) {
        entries.push(
          el(
            'span',
            {class: 'legend-entry muted'},
            `+${seen.length - LEGEND_KERNELS} more kernels (hover a track for names)`,
          ),
        );
      }
      entries.push(entry(el('span', {class: 'swatch idle'}), 'idle', {'data-mark': 'idle'}));
      if (this.counter) {
        entries.push(
          entry(
            el('span', {class: 'swatch', style: `background:${COUNTER_COLOR}`}),
            `${this.counter} (strip under each chip)`,
            {'data-mark': 'counter'},
          ),
        );
      }
      entries.push(
        entry(el('span', {class: 'swatch link'}), 'one collective, chip to chip', {
          'data-mark': 'collective',
        }),
      );
      if (this.straggler)
        entries.push(
          entry(el('span', {class: 'straggler'}, '⚑'), 'the straggler chip', {
            'data-mark': 'straggler',
          }),
        );
      this.legend.replaceChildren(...entries);
    }

    // A track's bins by pixel, for hovering: built on the first hover over it, not for every
    // track of every load.
    binIndex(t) {
      if (!t.binAt) {
        t.binAt = new Map();
        for (let i = 0; i < t.bins.length; i += 3) t.binAt.set(t.bins[i], i);
      }
      return t.binAt;
    }

    // What is under (x, y): a track and its slice or pixel.
    hit(x, y) {
      if (!this.data || x < LABEL_W) return null;
      const d = this.data,
        t = this.tOf(x);
      for (let i = 0; i < d.tracks.length; i++) {
        const ty = this.trackY(i);
        if (y < ty || y >= ty + ROW_H) continue;
        const tr = d.tracks[i],
          rel = t - d.from_ns;
        for (let k = 0; k < tr.slices.length; k += 4) {
          if (rel >= tr.slices[k] && rel < tr.slices[k] + tr.slices[k + 1]) {
            const kd = d.kernels[tr.slices[k + 2]];
            const [at, took] = [P.fmtNs(d.from_ns + tr.slices[k]), P.fmtNs(tr.slices[k + 1])];
            return `${tr.host} chip ${tr.chip}\n${kd.name} (${kd.module})\n${took} at ${at}`;
          }
        }
        const b = this.binIndex(tr).get(Math.floor(rel / d.ns_per_px));
        if (b !== undefined) {
          const busy = `${(tr.bins[b + 1] / 10).toFixed(1)}% busy over ${P.fmtNs(d.ns_per_px)}`;
          return `${tr.host} chip ${tr.chip}\n${busy}\nmostly ${d.kernels[tr.bins[b + 2]].name}`;
        }
        return `${tr.host} chip ${tr.chip}: idle`;
      }
      return null;
    }

    zoom(factor, atX) {
      const t = this.tOf(atX),
        span = Math.min(this.length, Math.max(1000, (this.view.to - this.view.from) * factor));
      let from = t - ((t - this.view.from) * span) / (this.view.to - this.view.from);
      from = Math.max(0, Math.min(this.length - span, from));
      this.view = {from, to: from + span};
      this.changed();
    }

    // Redraws what is held at once, then asks for the new window's detail.
    changed() {
      if (this.data) this.draw();
      clearTimeout(this.pending);
      this.pending = setTimeout(
        () =>
          this.load().catch((e) => {
            this.status.textContent = ` ${e.message}`;
          }),
        120,
      );
    }

    listen() {
      const cv = this.canvas;
      const pos = (ev) => {
        const r = cv.getBoundingClientRect();
        return [ev.clientX - r.left, ev.clientY - r.top];
      };
      cv.addEventListener(
        'wheel',
        (ev) => {
          ev.preventDefault();
          if (ev.shiftKey) {
            // Shift: scroll through the tracks instead
            this.scroller.scrollTop += ev.deltaY || ev.deltaX;
            return;
          }
          this.zoom(ev.deltaY > 0 ? 1.25 : 0.8, pos(ev)[0]);
        },
        {passive: false},
      );
      let drag = null;
      cv.addEventListener('mousedown', (ev) => {
        drag = {x: pos(ev)[0], view: {...this.view}};
        cv.style.cursor = 'grabbing';
      });
      window.addEventListener('mouseup', () => {
        if (drag) {
          drag = null;
          cv.style.cursor = '';
        }
      });
      cv.addEventListener('mousemove', (ev) => {
        const [x, y] = pos(ev);
        if (drag) {
          const span = drag.view.to - drag.view.from;
          let from = drag.view.from - ((x - drag.x) / this.plotWidth()) * span;
          from = Math.max(0, Math.min(this.length - span, from));
          this.view = {from, to: from + span};
          return this.changed();
        }
        const text = this.hit(x, y);
        this.tip.style.display = text ? 'block' : 'none';
        if (text) {
          this.tip.textContent = text;
          this.tip.style.left = `${x + 12}px`;
          this.tip.style.top = `${y + 12}px`;
        }
      });
      cv.addEventListener('mouseleave', () => {
        this.tip.style.display = 'none';
      });
      cv.addEventListener('dblclick', () => {
        this.view = {from: 0, to: this.length};
        this.changed();
      });
    }
  }

  P.PodTimeline = PodTimeline;
})();
