// The pod timeline (hosts x chips as tracks, kernels on the corrected clock, counters under
// each chip, collectives linked across chips, the straggler marked) and the collective waits
// heatmap, drawn on canvases by our own code. The timeline asks the aggregator for the visible
// window at the canvas's width after every zoom or pan, so it never holds more than a screen
// of detail: slices a pixel wide or more, per-pixel busy fractions below that.
(() => {
  'use strict';
  const P = (window.podprof = window.podprof || {});

  const LABEL_W = 130,
    AXIS_H = 22,
    ROW_H = 16,
    COUNTER_H = 12,
    HOST_GAP = 6;
  // The canvas is at most this tall and scrolls over the tracks: a 256-chip pod is drawn a
  // screenful at a time, not as one 8000-pixel canvas.
  const MAX_VIEW_H = 720;
  const BG = '#ffffff';

  // A hue from the name, mixed (FNV-1a, then murmur3's finaliser) so that names one character
  // apart ("fusion.7", "fusion.8") land far apart on the wheel, not a degree apart.
  function kernelHue(name) {
    let h = 0x811c9dc5;
    for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 0x01000193);
    h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
    h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
    return ((h ^ (h >>> 16)) >>> 0) % 360;
  }
  // A kernel's colour as one pixel of an ImageData (RGBA bytes, little-endian: 0xAABBGGRR):
  // hsl(hue, 62%, 50%), the hue from its name.
  function kernelPixel(name) {
    const h = kernelHue(name) / 360,
      s = 0.62,
      l = 0.5;
    const q = l < 0.5 ? l * (1 + s) : l + s - l * s,
      p = 2 * l - q;
    const ch = (t) => {
      t = (t + 1) % 1;
      const v =
        t < 1 / 6
          ? p + (q - p) * 6 * t
          : t < 1 / 2
            ? q
            : t < 2 / 3
              ? p + (q - p) * (2 / 3 - t) * 6
              : p;
      return Math.round(v * 255);
    };
    return (0xff000000 | (ch(h - 1 / 3) << 16) | (ch(h) << 8) | ch(h + 1 / 3)) >>> 0;
  }
  // The same colour for the canvas's fill style.
  function kernelColor(name) {
    const px = kernelPixel(name);
    return `rgb(${px & 0xff}, ${(px >>> 8) & 0xff}, ${(px >>> 16) & 0xff})`;
  }
  const COUNTER_PIXEL = 0xff948779; // #7b8794
  const COUNTER_COLOR = '#7b8794';
  const COUNTER_BG_PIXEL = 0xfffbfafa; // #fafafb: the strip's extent shows where it reads 0
  const ROW_PIXEL = 0xfff7f4f3; // #f3f4f7: a track's background
  // Kernels the legend names: the ones that fill most of the window.
  const LEGEND_KERNELS = 10;

  // Filled rectangles written straight into pixels: a pod's overview is hundreds of thousands of
  // one-pixel columns, which fillRect draws a hundred times slower. Coordinates in device pixels.
  class PixelPainter {
    // A fresh area: reading the canvas back would cost more than all the painting.
    constructor(ctx, x0, y0, width, height) {
      this.ctx = ctx;
      this.x0 = x0;
      this.y0 = y0;
      this.img = ctx.createImageData(width, height);
      this.px = new Uint32Array(this.img.data.buffer); // transparent: the page's white shows
      this.w = width;
      this.h = height;
    }
    rect(x, y, w, h, colour) {
      const xa = Math.max(0, Math.floor(x) - this.x0),
        xb = Math.min(this.w, Math.floor(x + w) - this.x0);
      const ya = Math.max(0, Math.floor(y) - this.y0),
        yb = Math.min(this.h, Math.floor(y + h) - this.y0);
      const xe = Math.max(xb, Math.min(this.w, xa + 1)); // at least a pixel wide
      if (xe - xa === 1) {
        // the common case: a column, one store per row
        for (let i = ya * this.w + xa, end = yb * this.w; i < end; i += this.w) this.px[i] = colour;
        return;
      }
      for (let row = ya; row < yb; row++)
        this.px.fill(colour, row * this.w + xa, row * this.w + xe);
    }
    done() {
      this.ctx.putImageData(this.img, this.x0, this.y0);
    }
  }

  function niceStep(span, target) {
    const raw = span / target,
      p = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const m of [1, 2, 5, 10]) if (raw <= m * p) return m * p;
    return 10 * p;
  }

  // The axis's ticks over [from, to] ns, every `step` ns, labelled in one unit (the largest the
  // window's end reaches) with as many decimals as the step needs: zoomed to 0.1 ms steps at
  // 518 ms they read "518.1 ms", "518.2 ms", never "518 ms" three times.
  function axisTicks(from, to, step) {
    const units = [
      [1e9, 's'],
      [1e6, 'ms'],
      [1e3, 'us'],
      [1, 'ns'],
    ];
    const [div, unit] =
      units.find(([d]) => Math.max(Math.abs(from), Math.abs(to)) >= d) || units[3];
    const decimals = Math.max(0, Math.ceil(-Math.log10(step / div) - 1e-9));
    const ticks = [];
    // From the first multiple of the step by index, not by adding: no drift over the ticks.
    for (let i = Math.ceil(from / step), t = i * step; t <= to; t = ++i * step) {
      ticks.push({t, label: `${(t / div).toFixed(decimals)} ${unit}`});
    }
    return ticks;
  }

  // A counter's value for people, by its name's convention: busy and stall gauges are fractions
  // (shown as %), `percent` gauges are already in percent, the rest in SI prefixes.
  function fmtCounter(name, v) {
    if (/_busy$|^stall|_fraction$/.test(name)) return `${(v * 100).toFixed(1)}%`;
    if (/percent/.test(name)) return `${v.toFixed(1)}%`;
    const a = Math.abs(v);
    for (const [d, u] of [
      [1e12, 'T'],
      [1e9, 'G'],
      [1e6, 'M'],
      [1e3, 'k'],
    ])
      if (a >= d) return `${(v / d).toPrecision(3)}${u}`;
    return a === 0 ? '0' : v.toPrecision(3);
  }

  class PodTimeline {
    constructor(container, capture, straggler) {
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

    // Read from the layout once per load or draw: reading clientWidth per slice would lay the
    // page out again each time.
    plotWidth() {
      return this.pw || this.measure();
    }
    measure() {
      return (this.pw = Math.max(100, Math.round(this.canvas.clientWidth || 1000) - LABEL_W));
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

    // The counter strip's scale in words, written only when it changes (draw runs per scroll).
    setScale(max) {
      const text = !this.counter
        ? ''
        : max > 0
          ? `strip 0 – ${fmtCounter(this.counter, max)} (bottom to top; the highest in view)`
          : 'strip: no samples in view';
      if (this.scale.textContent === text) return;
      this.scale.textContent = text;
      this.scale.dataset.min = 0;
      this.scale.dataset.max = max;
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

    trackHeight() {
      return ROW_H + (this.counter ? COUNTER_H : 0) + 2;
    }

    // The top of track `i`'s kernel row in the whole list, CSS pixels (tops[] caches it per
    // load: a host's tracks are grouped, with a gap between hosts).
    listY(i) {
      const tracks = this.data.tracks;
      if (!this.tops || this.tops.length !== tracks.length || this.topsFor !== this.trackHeight()) {
        this.tops = new Array(tracks.length);
        this.topsFor = this.trackHeight();
        let y = AXIS_H;
        tracks.forEach((t, j) => {
          if (j > 0 && t.host !== tracks[j - 1].host) y += HOST_GAP;
          this.tops[j] = y;
          y += this.topsFor;
        });
      }
      return this.tops[i];
    }
    // ... and on the canvas, which shows the list from the scroll position down.
    trackY(i) {
      return this.listY(i) - this.scrollTop;
    }

    // ns from the capture's start -> x in CSS pixels, for the current view.
    xOf(t) {
      return LABEL_W + ((t - this.view.from) / (this.view.to - this.view.from)) * this.plotWidth();
    }
    tOf(x) {
      return this.view.from + ((x - LABEL_W) / this.plotWidth()) * (this.view.to - this.view.from);
    }

    draw() {
      const d = this.data,
        tracks = d.tracks;
      const cssW = this.plotWidth() + LABEL_W;
      const fullH = tracks.length ? this.listY(tracks.length - 1) + this.trackHeight() + 4 : 60;
      const cssH = Math.min(fullH, MAX_VIEW_H);
      this.scroller.style.height = `${cssH}px`;
      this.spacer.style.height = `${fullH - cssH}px`;
      this.scrollTop = Math.min(this.scroller.scrollTop, fullH - cssH);
      const dpr = window.devicePixelRatio || 1;
      if (
        this.canvas.width !== Math.round(cssW * dpr) ||
        this.canvas.height !== Math.round(cssH * dpr)
      ) {
        this.canvas.width = Math.round(cssW * dpr);
        this.canvas.height = Math.round(cssH * dpr);
        this.canvas.style.height = `${cssH}px`;
      }
      // The tracks in sight.
      const shown = [];
      tracks.forEach((t, i) => {
        const y = this.trackY(i);
        if (y + this.trackHeight() > AXIS_H && y < cssH) shown.push(i);
      });
      const c = this.ctx;
      c.setTransform(dpr, 0, 0, dpr, 0, 0);
      let counterMax = 0;
      for (const t of tracks) {
        const pts = (t.counters || {})[this.counter] || [];
        for (let i = 2; i < pts.length; i += 3) counterMax = Math.max(counterMax, pts[i]);
      }
      // Pixels first (rows, busy pixels, counters), then what the canvas draws best on top:
      // labels, the axis, slices with their names, collective links.
      const painter = new PixelPainter(
        c,
        Math.round(LABEL_W * dpr),
        0,
        Math.max(1, this.canvas.width - Math.round(LABEL_W * dpr)),
        this.canvas.height,
      );
      for (const i of shown) this.paintTrack(painter, tracks[i], i, counterMax, dpr);
      painter.done();
      this.setScale(counterMax);
      c.fillStyle = BG;
      c.fillRect(0, 0, LABEL_W, cssH);
      c.fillRect(0, 0, cssW, AXIS_H); // the axis stays on top as the tracks scroll under it
      this.drawAxis(c);
      const links = new Map();
      for (const i of shown) this.drawLabel(c, tracks[i], i, counterMax);
      for (const i of shown) this.drawSlices(c, tracks[i], i, links);
      this.drawLinks(c, links);
    }

    drawAxis(c) {
      const ticks = axisTicks(
        this.view.from,
        this.view.to,
        niceStep(this.view.to - this.view.from, 8),
      );
      c.fillStyle = '#6b7383';
      c.font = '11px system-ui, sans-serif';
      c.strokeStyle = '#e6e8ee';
      for (const {t, label} of ticks) {
        const x = this.xOf(t);
        c.beginPath();
        c.moveTo(x, AXIS_H - 4);
        c.lineTo(x, AXIS_H);
        c.stroke();
        c.fillText(label, x + 2, AXIS_H - 8);
      }
      this.axis = ticks; // what the axis reads ({t, label}), for tests
    }

    // The track's label, the straggler's in red with a flag; beside its counter strip, the
    // value the strip's top stands for.
    drawLabel(c, t, i, counterMax) {
      const y = this.trackY(i);
      const straggler =
        this.straggler && t.host === this.straggler.host && t.chip === this.straggler.chip;
      c.fillStyle = straggler ? '#c62828' : '#1d2330';
      c.font = `${straggler ? 'bold ' : ''}11px system-ui, sans-serif`;
      c.fillText(`${straggler ? '⚑ ' : ''}${t.host} / ${t.chip}`, 4, y + ROW_H - 4);
      if (!this.counter || counterMax <= 0) return;
      c.fillStyle = '#6b7383';
      c.font = '9px system-ui, sans-serif';
      c.textAlign = 'right';
      c.fillText(fmtCounter(this.counter, counterMax), LABEL_W - 3, y + ROW_H + COUNTER_H - 2);
      c.textAlign = 'left';
    }

    // Pixels partly filled by kernels (a column as high as the pixel was busy, in the colour of
    // the kernel that filled most of it) and the counter's range per pixel under the row.
    paintTrack(painter, t, i, counterMax, dpr) {
      const d = this.data,
        y = this.trackY(i),
        pw = this.plotWidth();
      // Screen x (device pixels) of data pixel p is x0 + p * step: one multiply-add per bin.
      const k = (pw / (this.view.to - this.view.from)) * dpr;
      // The data's window is the view's rounded out to whole ns, so a bin lands a hair (float
      // error) left of its pixel; floored, it would be drawn a whole pixel left. 1/1000 px right
      // of the exact position puts it back and moves nothing visibly.
      const step = d.ns_per_px * k,
        x0 = LABEL_W * dpr + (d.from_ns - this.view.from) * k + 1e-3;
      const colWidth = Math.max(1, Math.floor(step));
      const rowTop = Math.round(y * dpr),
        rowBottom = Math.round((y + ROW_H) * dpr);
      painter.rect(LABEL_W * dpr, rowTop, pw * dpr, rowBottom - rowTop, ROW_PIXEL);
      const bins = t.bins,
        pixels = this.pixels,
        rowH = rowBottom - rowTop;
      for (let b = 0; b < bins.length; b += 3) {
        const x = x0 + bins[b] * step;
        if (x + step < painter.x0) continue;
        const h = Math.max(1, Math.round((rowH * bins[b + 1]) / 1000));
        painter.rect(x, rowBottom - h, colWidth, h, pixels[bins[b + 2]]);
      }
      if (!this.counter || counterMax <= 0) return;
      const pts = (t.counters || {})[this.counter] || [];
      const cBottom = Math.round((y + ROW_H + 1 + COUNTER_H) * dpr),
        cH = COUNTER_H * dpr;
      painter.rect(LABEL_W * dpr, cBottom - cH, pw * dpr, cH, COUNTER_BG_PIXEL);
      for (let p = 0; p < pts.length; p += 3) {
        const x = x0 + pts[p] * step;
        if (x + step < painter.x0) continue;
        // Filled up to the pixel's highest sample: the counter reads as an area chart.
        const hi = Math.max(1, Math.round((cH * pts[p + 2]) / counterMax));
        painter.rect(x, cBottom - hi, colWidth, hi, COUNTER_PIXEL);
      }
    }

    // Kernels at least a pixel wide, named where they have room; collectives noted for links.
    drawSlices(c, t, i, links) {
      const d = this.data,
        y = this.trackY(i);
      c.save();
      c.beginPath();
      c.rect(LABEL_W, y, this.plotWidth(), ROW_H);
      c.clip();
      c.font = '10px system-ui, sans-serif';
      for (let k = 0; k < t.slices.length; k += 4) {
        const t0 = d.from_ns + t.slices[k],
          x0 = this.xOf(t0),
          x1 = this.xOf(t0 + t.slices[k + 1]);
        const name = d.kernels[t.slices[k + 2]].name;
        c.fillStyle = this.colors[t.slices[k + 2]];
        c.fillRect(x0, y, Math.max(1, x1 - x0), ROW_H);
        if (x1 - x0 > 40) {
          c.fillStyle = '#fff';
          c.fillText(
            name,
            Math.max(x0, LABEL_W) + 3,
            y + ROW_H - 4,
            x1 - Math.max(x0, LABEL_W) - 6,
          );
        }
        const coll = t.slices[k + 3];
        if (coll) {
          if (!links.has(coll)) links.set(coll, []);
          links.get(coll).push([x0, y + ROW_H / 2]);
        }
      }
      c.restore();
    }

    // A line through the slices of each collective, chip to chip: who started late shows as a
    // slant.
    drawLinks(c, links) {
      if (links.size === 0 || links.size > 3000) return;
      c.save();
      c.beginPath();
      c.rect(LABEL_W, AXIS_H, this.plotWidth(), this.canvas.height);
      c.clip();
      c.strokeStyle = 'rgba(40, 40, 60, 0.35)';
      c.lineWidth = 1;
      for (const pts of links.values()) {
        if (pts.length < 2) continue;
        pts.sort((a, b) => a[1] - b[1]);
        c.beginPath();
        c.moveTo(pts[0][0], pts[0][1]);
        for (const [x, y] of pts.slice(1)) c.lineTo(x, y);
        c.stroke();
      }
      c.restore();
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

  // Chips down, steps across; the darker the cell, the longer the chip waited in collectives
  // for the last chip to arrive in that step.
  class WaitHeatmap {
    constructor(container, data) {
      const {el} = P;
      this.data = data;
      this.canvas = el('canvas', {id: 'heatmap-canvas'});
      this.tip = el('div', {class: 'tooltip'});
      container.append(el('div', {class: 'timeline-wrap'}, this.canvas, this.tip));
      this.draw();
      this.canvas.addEventListener('mousemove', (ev) => this.hover(ev));
      this.canvas.addEventListener('mouseleave', () => {
        this.tip.style.display = 'none';
      });
    }

    // Rows shrink for a large pod (down to 3 pixels a chip) so the whole pod fits on a screen.
    cell() {
      const steps = this.data.steps.length || 1;
      const h = Math.max(3, Math.min(12, Math.floor(720 / Math.max(1, this.data.chips.length))));
      return {w: Math.max(2, ((this.canvas.clientWidth || 1000) - LABEL_W) / steps), h};
    }

    draw() {
      const d = this.data,
        {w, h} = this.cell();
      const cssW = this.canvas.clientWidth || 1000,
        cssH = AXIS_H + d.chips.length * h + 4;
      const dpr = window.devicePixelRatio || 1;
      this.canvas.width = Math.round(cssW * dpr);
      this.canvas.height = Math.round(cssH * dpr);
      this.canvas.style.height = `${cssH}px`;
      const c = this.canvas.getContext('2d');
      c.setTransform(dpr, 0, 0, dpr, 0, 0);
      c.fillStyle = BG;
      c.fillRect(0, 0, cssW, cssH);
      let max = 0;
      for (const row of d.wait_ns) for (const v of row) max = Math.max(max, v);
      c.font = '10px system-ui, sans-serif';
      c.fillStyle = '#6b7383';
      const legend = `steps 1–${d.steps.length}; darkest ${P.fmtNs(max)} waiting`;
      c.fillText(legend, LABEL_W, AXIS_H - 8);
      const painter = new PixelPainter(
        c,
        Math.round(LABEL_W * dpr),
        Math.round(AXIS_H * dpr),
        Math.max(1, this.canvas.width - Math.round(LABEL_W * dpr)),
        Math.max(1, this.canvas.height - Math.round(AXIS_H * dpr)),
      );
      d.chips.forEach((chip, i) => {
        const y = AXIS_H + i * h;
        d.wait_ns[i].forEach((v, s) => {
          const f = max > 0 ? v / max : 0; // white to red
          const g = 255 - Math.round(f * 215);
          painter.rect(
            (LABEL_W + s * w) * dpr,
            y * dpr,
            (w - 1) * dpr,
            (h - 1) * dpr,
            (0xff000000 | (g << 16) | (g << 8) | (255 - Math.round(f * 57))) >>> 0,
          );
        });
      });
      painter.done();
      c.fillStyle = '#1d2330';
      // Every chip named when rows are tall enough; else each host at its first chip.
      d.chips.forEach((chip, i) => {
        if (h >= 9) c.fillText(`${chip.host} / ${chip.chip}`, 4, AXIS_H + i * h + h - 2);
        else if (i === 0 || d.chips[i - 1].host !== chip.host)
          c.fillText(chip.host, 4, AXIS_H + i * h + 9);
      });
    }

    hover(ev) {
      const r = this.canvas.getBoundingClientRect(),
        x = ev.clientX - r.left,
        y = ev.clientY - r.top;
      const {w, h} = this.cell(),
        i = Math.floor((y - AXIS_H) / h),
        s = Math.floor((x - LABEL_W) / w);
      const d = this.data;
      if (x < LABEL_W || i < 0 || i >= d.chips.length || s < 0 || s >= d.steps.length) {
        this.tip.style.display = 'none';
        return;
      }
      const {host, chip} = d.chips[i];
      const waited = P.fmtNs(d.wait_ns[i][s]);
      this.tip.textContent = `${host} chip ${chip}, step ${s + 1}\nwaited ${waited}`;
      this.tip.style.display = 'block';
      this.tip.style.left = `${x + 12}px`;
      this.tip.style.top = `${y + 12}px`;
    }
  }

  Object.assign(P, {
    PodTimeline,
    WaitHeatmap,
    kernelColor,
    axisTicks,
    TIMELINE_LAYOUT: {LABEL_W, AXIS_H, ROW_H},
  });
})();
