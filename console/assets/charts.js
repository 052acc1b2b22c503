// Line charts as SVG, written by hand: a console needs axes, gridlines, a
// legend and gaps for missing points, which is a page of code and no
// library.

const svgNS = "http://www.w3.org/2000/svg";
const height = 200;
const margin = { left: 46, right: 12, top: 8, bottom: 22 };
const legendRow = 16;

function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(svgNS, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
  node.append(...children);
  return node;
}

/** niceScale returns a step and a top (a multiple of the step, ≥ max) for about four gridlines. */
function niceScale(max) {
  if (!(max > 0)) return { step: 1, top: 4 };
  const raw = max / 4;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw);
  return { step, top: step * Math.ceil(max / step) };
}

function clock(unix) {
  return new Date(unix * 1000).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", hour12: false });
}

/**
 * lineChart draws series over time as an SVG element with role="img" and
 * an aria-label summing each series up.
 *
 *   times:  unix seconds, one per point, oldest first
 *   series: [{name, values}], values numbers or null (a gap)
 *   format: how a value reads (axis labels, summary); default: as is
 *   width:  in CSS pixels, the drawing's width (its container's)
 */
export function lineChart({ title, times, series, format = String, width = 480 }) {
  width = Math.max(280, Math.round(width));
  const all = series.flatMap((s) => s.values).filter((v) => typeof v === "number");
  const max = all.length ? Math.max(...all) : 0;
  const min = all.length ? Math.min(...all) : 0;
  const summary = series.map((s) => describe(s, format)).join("; ");
  const root = svg("svg", { class: "chart-svg", role: "img", width, viewBox: `0 0 ${width} ${height}`, "aria-label": `${title}, last hour: ${summary || "no data"}` });
  root.append(svg("title", {}, `${title}: ${summary || "no data"}`));

  // Legend, wrapping to as many rows as needed, then min and max.
  const legend = svg("g", { class: "legend" });
  let x = margin.left;
  let y = 10;
  const place = (w) => {
    if (x + w > width - margin.right && x > margin.left) {
      x = margin.left;
      y += legendRow;
    }
    const at = x;
    x += w;
    return at;
  };
  series.forEach((s, i) => {
    const at = place(26 + s.name.length * 6.6);
    legend.append(
      svg("line", { class: `series series-${i}`, x1: at, x2: at + 14, y1: y - 4, y2: y - 4 }),
      svg("text", { x: at + 18, y }, s.name),
    );
  });
  const range = all.length ? `min ${format(min)} · max ${format(max)}` : "no data";
  legend.append(svg("text", { class: "muted", x: place(16 + range.length * 6.2), y }, range));
  root.append(legend);

  const top = y + margin.top;
  const plotH = height - top - margin.bottom;
  const plotW = width - margin.left - margin.right;
  const { step, top: yTop } = niceScale(max);
  const px = (i) => margin.left + (times.length > 1 ? (i / (times.length - 1)) * plotW : plotW / 2);
  const py = (v) => top + plotH - (v / yTop) * plotH;

  // Horizontal gridlines with their values; vertical ones every 15 points.
  const grid = svg("g", { class: "grid" });
  for (let k = 0; k * step <= yTop; k++) {
    const v = k * step;
    grid.append(
      svg("line", { x1: margin.left, x2: width - margin.right, y1: py(v), y2: py(v) }),
      svg("text", { class: "axis-label", x: margin.left - 6, y: py(v) + 4, "text-anchor": "end" }, format(v)),
    );
  }
  const last = times.length - 1;
  const ticks = [0, 15, 30, 45].filter((i) => i < last - 7).concat(last > 0 ? [last] : []);
  for (const i of ticks) {
    const anchor = i === 0 ? "start" : i === last ? "end" : "middle";
    grid.append(
      svg("line", { x1: px(i), x2: px(i), y1: top, y2: top + plotH }),
      svg("text", { class: "axis-label", x: px(i), y: height - 6, "text-anchor": anchor }, clock(times[i])),
    );
  }
  grid.append(svg("line", { class: "axis", x1: margin.left, x2: width - margin.right, y1: top + plotH, y2: top + plotH }));
  root.append(grid);

  // One path per series; a null ends a segment. A point alone is a dot.
  series.forEach((s, i) => {
    let d = "";
    const dots = [];
    s.values.forEach((v, j) => {
      if (typeof v !== "number") return;
      const prev = typeof s.values[j - 1] === "number";
      const next = typeof s.values[j + 1] === "number";
      if (!prev && !next) dots.push(svg("circle", { class: `dot series-${i}`, cx: px(j), cy: py(v), r: 2 }));
      d += `${prev ? "L" : "M"}${px(j).toFixed(1)},${py(v).toFixed(1)}`;
    });
    if (d) root.append(svg("path", { class: `series series-${i}`, d }));
    root.append(...dots);
  });
  return root;
}

function describe(s, format) {
  const values = s.values.filter((v) => typeof v === "number");
  if (!values.length) return `${s.name} no data`;
  const latest = [...s.values].reverse().find((v) => typeof v === "number");
  return `${s.name} latest ${format(latest)}, max ${format(Math.max(...values))}`;
}
