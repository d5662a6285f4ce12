// The collective waits heatmap under the pod timeline: a row per chip and a column per step,
// drawn on a canvas (with timeline_draw.js's PixelPainter) from the waits that the timeline's
// first load brings.
(() => {
  'use strict';
  const P = (window.podprof = window.podprof || {});
  const {LABEL_W, AXIS_H, BG, PixelPainter} = P.canvas; // timeline_draw.js

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

  P.WaitHeatmap = WaitHeatmap;
})();
