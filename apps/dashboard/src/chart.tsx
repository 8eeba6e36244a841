import { formatDollars, formatNumber } from './format';

export interface DayPoint {
  date: string;
  calls: number;
  cost: number;
  errors: number;
}

/** Every UTC day of the window, oldest first, with zeros where there was no usage. */
export function fillDays(days: number, rows: DayPoint[], today = new Date()): DayPoint[] {
  const byDate = new Map(rows.map((row) => [row.date.slice(0, 10), row]));
  const out: DayPoint[] = [];
  for (let offset = days - 1; offset >= 0; offset -= 1) {
    const date = new Date(Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), today.getUTCDate() - offset)).toISOString().slice(0, 10);
    out.push(byDate.get(date) ?? { date, calls: 0, cost: 0, errors: 0 });
  }
  return out;
}

const WIDTH = 720;
const HEIGHT = 220;
const PAD = { top: 12, right: 48, bottom: 28, left: 56 };

/**
 * Spend per day as bars (left axis, dollars) and calls per day as a line (right axis), hand-drawn
 * in SVG. A table with the same numbers follows for screen readers.
 */
export function UsageChart({ days }: { days: DayPoint[] }) {
  const innerWidth = WIDTH - PAD.left - PAD.right;
  const innerHeight = HEIGHT - PAD.top - PAD.bottom;
  const maxCost = Math.max(...days.map((d) => d.cost), 0) || 1;
  const maxCalls = Math.max(...days.map((d) => d.calls), 0) || 1;
  const step = innerWidth / Math.max(days.length, 1);
  const barWidth = Math.max(step * 0.7, 1);
  const x = (i: number) => PAD.left + i * step + step / 2;
  const yCost = (v: number) => PAD.top + innerHeight - (v / maxCost) * innerHeight;
  const yCalls = (v: number) => PAD.top + innerHeight - (v / maxCalls) * innerHeight;
  const line = days.map((d, i) => `${i === 0 ? 'M' : 'L'}${x(i).toFixed(1)},${yCalls(d.calls).toFixed(1)}`).join(' ');
  const ticks = [0, 0.5, 1];
  const labelEvery = Math.ceil(days.length / 6);

  return (
    <figure className="chart">
      <svg viewBox={`0 0 ${WIDTH} ${HEIGHT}`} role="img" aria-label={`Spend and calls per day over the last ${days.length} days`}>
        {ticks.map((t) => (
          <g key={t}>
            <line
              x1={PAD.left}
              x2={WIDTH - PAD.right}
              y1={PAD.top + innerHeight * (1 - t)}
              y2={PAD.top + innerHeight * (1 - t)}
              className="chart-grid"
            />
            <text x={PAD.left - 6} y={PAD.top + innerHeight * (1 - t) + 4} textAnchor="end" className="chart-axis">
              {formatDollars(maxCost * t)}
            </text>
            <text x={WIDTH - PAD.right + 6} y={PAD.top + innerHeight * (1 - t) + 4} className="chart-axis">
              {formatNumber(Math.round(maxCalls * t))}
            </text>
          </g>
        ))}
        {days.map((d, i) => (
          <rect
            key={d.date}
            x={x(i) - barWidth / 2}
            y={yCost(d.cost)}
            width={barWidth}
            height={PAD.top + innerHeight - yCost(d.cost)}
            className="chart-bar"
          >
            <title>{`${d.date}: ${formatDollars(d.cost)}, ${formatNumber(d.calls)} calls, ${formatNumber(d.errors)} errors`}</title>
          </rect>
        ))}
        <path d={line} className="chart-line" fill="none" />
        {days.map((d, i) =>
          i % labelEvery === 0 || i === days.length - 1 ? (
            <text key={d.date} x={x(i)} y={HEIGHT - 8} textAnchor="middle" className="chart-axis">
              {d.date.slice(5)}
            </text>
          ) : null,
        )}
      </svg>
      <figcaption className="chart-legend">
        <span className="legend-swatch legend-bar" aria-hidden="true" /> Spend (left axis){' '}
        <span className="legend-swatch legend-line" aria-hidden="true" /> Calls (right axis)
      </figcaption>
      <table className="visually-hidden">
        <caption>Usage per day</caption>
        <thead>
          <tr>
            <th scope="col">Day</th>
            <th scope="col">Spend</th>
            <th scope="col">Calls</th>
            <th scope="col">Errors</th>
          </tr>
        </thead>
        <tbody>
          {days.map((d) => (
            <tr key={d.date}>
              <td>{d.date}</td>
              <td>{formatDollars(d.cost)}</td>
              <td>{d.calls}</td>
              <td>{d.errors}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </figure>
  );
}
