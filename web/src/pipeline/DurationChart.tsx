import { useEffect, useRef, useState } from 'react';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import type { RunStatus } from '../../../src/model/run.js';
import { formatDuration, runHref } from '../format.js';
import { useDocumentTheme } from '../theme/theme.js';
import { statusColor, themeColor } from './chart-colors.js';
import type { DurationData } from './chart-data.js';

const HEIGHT = 220;

function shortTime(iso: string): string {
  const date = new Date(iso);
  return date.toLocaleString(undefined, {
    month: 'numeric',
    day: 'numeric',
    hour: '2-digit',
    minute: '2-digit',
  });
}

/**
 * A uPlot bar chart of run durations, a bar per run, coloured by status. After each draw the
 * host says what was drawn (`data-bars`: how many bars; `data-bar-statuses`: each bar's status,
 * left to right), counted from the bars uPlot's path builder reports drawing (its `each`), so a
 * test reads what is on the canvas, not what was handed in.
 */
export function DurationChart({ data, label }: { data: DurationData; label: string }) {
  const host = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const theme = useDocumentTheme();
  const statuses = data.series.map((series) => series.status).join(',');
  const latest = useRef(data);
  // The bar under the pointer (its run's index), as uPlot's cursor says.
  const [hovered, setHovered] = useState<number | null>(null);

  // A new plot when the series (statuses) or the theme change; otherwise new data is set on it.
  useEffect(() => {
    const element = host.current;
    if (!element) return;
    const drawn = new Map<number, string>();
    const current = () => latest.current;
    // `statuses` is the series' statuses joined (a string, so the effect sees a change by value).
    const seriesStatuses = statuses === '' ? [] : (statuses.split(',') as RunStatus[]);
    const bars = uPlot.paths.bars!({
      size: [0.7, 48],
      each: (_u, seriesIdx, dataIdx) => {
        drawn.set(dataIdx, seriesStatuses[seriesIdx - 1] ?? '');
      },
    });
    const axis = themeColor('--chart-axis', '#4a5260');
    const grid = themeColor('--chart-grid', '#d5dae1');
    const options: uPlot.Options = {
      width: Math.max(element.clientWidth, 200),
      height: HEIGHT,
      legend: { show: false },
      // Room on the right for half of the last bar's time label, which is centred on the bar.
      padding: [12, 48, 0, 0],
      cursor: { drag: { x: false, y: false } },
      scales: { x: { time: false, distr: 2 }, y: { range: (_u, _min, max) => [0, max || 1] } },
      axes: [
        {
          stroke: axis,
          grid: { show: false },
          // A label is about 90 px wide: fewer of them in a narrow chart, never overlapping.
          space: 110,
          values: (_u, splits) =>
            splits.map((i) => {
              const run = current().runs[Math.round(i)];
              return run ? shortTime(run.createdAt) : '';
            }),
        },
        {
          stroke: axis,
          grid: { stroke: grid },
          size: 70,
          values: (_u, splits) => splits.map(axisDuration),
        },
      ],
      series: [
        {},
        ...seriesStatuses.map((status) => ({
          label: status,
          fill: statusColor(status),
          stroke: statusColor(status),
          paths: bars,
          points: { show: false },
        })),
      ],
      hooks: {
        setCursor: [(u) => setHovered(u.cursor.idx ?? null)],
        drawClear: [() => drawn.clear()],
        draw: [
          () => {
            const order = [...drawn.keys()].sort((a, b) => a - b);
            element.dataset['bars'] = String(order.length);
            element.dataset['barStatuses'] = order.map((i) => drawn.get(i)).join(' ');
          },
        ],
      },
    };
    const chart = new uPlot(options, toAligned(current()), element);
    plot.current = chart;
    const resize =
      typeof ResizeObserver === 'function'
        ? new ResizeObserver(() =>
            chart.setSize({ width: Math.max(element.clientWidth, 200), height: HEIGHT }),
          )
        : null;
    resize?.observe(element);
    return () => {
      resize?.disconnect();
      chart.destroy();
      plot.current = null;
    };
  }, [statuses, theme]);

  useEffect(() => {
    latest.current = data;
    plot.current?.setData(toAligned(data));
  }, [data]);

  const run = hovered === null ? undefined : data.runs[hovered];
  // What its bar shows: the duration, a running run's so far.
  const seconds =
    hovered === null
      ? undefined
      : (data.series.map((series) => series.values[hovered]).find((v) => v != null) ?? undefined);
  const open = () => {
    if (!run) return;
    // As a link would: the app routes on popstate (App.tsx), without reloading the page.
    window.history.pushState(null, '', runHref(run.pipeline, run.runId));
    window.dispatchEvent(new PopStateEvent('popstate'));
  };

  return (
    <figure className="duration-chart">
      <div
        ref={host}
        className="duration-chart-plot"
        role="img"
        aria-label={label}
        data-testid="duration-chart"
        onClick={open}
      />
      <figcaption>
        <p className="chart-hover" data-testid="chart-hover">
          {run ? (
            <>
              <a href={runHref(run.pipeline, run.runId)}>{run.runId}</a> · {run.status} ·{' '}
              {seconds === undefined ? 'not started' : formatDuration(seconds * 1000)}
            </>
          ) : (
            'Point at a bar to see its run; click it to open the run.'
          )}
        </p>
        <ul className="chart-legend" aria-label="Colours">
          {data.series.map((series) => (
            <li key={series.status}>
              <span
                className="chart-swatch"
                style={{ background: statusColor(series.status) }}
                aria-hidden="true"
              />
              {series.status}
            </li>
          ))}
        </ul>
      </figcaption>
    </figure>
  );
}

/** A tick of the duration axis: below a minute, to a tenth of a second (or in ms), not floored. */
function axisDuration(seconds: number): string {
  if (seconds === 0) return '0';
  if (seconds < 1) return `${Math.round(seconds * 1000)} ms`;
  if (seconds < 60) return `${Number(seconds.toFixed(1))}s`;
  return formatDuration(seconds * 1000);
}

/** uPlot's columns: the x values (run index, oldest first), then one column per series. */
function toAligned(data: DurationData): uPlot.AlignedData {
  return [data.runs.map((_run, i) => i), ...data.series.map((series) => series.values)];
}
