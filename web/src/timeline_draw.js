// What the pod timeline and the waits heatmap draw with (the layout, kernels' colours, a
// painter writing pixels straight into a canvas, the time axis's ticks, counter values), and
// TrackCanvas: how the timeline lays out and paints its tracks for the view it holds (kernels
// on the corrected clock, counters under each chip, collectives linked across chips, the
// straggler marked). PodTimeline (timeline.js) extends TrackCanvas; heatmap.js and
// timeline.js take the rest from P.canvas, so this file loads before both.
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

  // Lays out and paints the tracks of `data` (a /timeline response) for `view`: the fields
  // PodTimeline sets (canvas, scroller, spacer, ctx, scale, data, view, counter, straggler,
  // colors, pixels) are what these read.
  class TrackCanvas {
    // Read from the layout once per load or draw: reading clientWidth per slice would lay the
    // page out again each time.
    plotWidth() {
      return this.pw || this.measure();
    }
    measure() {
      return (this.pw = Math.max(100, Math.round(this.canvas.clientWidth || 1000) - LABEL_W));
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
  }

  P.canvas = {
    LABEL_W,
    AXIS_H,
    ROW_H,
    BG,
    COUNTER_COLOR,
    PixelPainter,
    kernelPixel,
    kernelColor,
    TrackCanvas,
  };
  Object.assign(P, {kernelColor, axisTicks, TIMELINE_LAYOUT: {LABEL_W, AXIS_H, ROW_H}});
})();
