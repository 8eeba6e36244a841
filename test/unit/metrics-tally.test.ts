import { describe, expect, it } from 'vitest';
import { prom, TallyCounter, TallyHistogram } from '#core/platform';

// The tallies the edge updates on every request must read, when scraped, exactly as prom-client's
// own Histogram and Counter read after the same updates: same lines, same values.

const BUCKETS = [0.001, 0.01, 0.1, 1, 10];

function lines(text: string): string[] {
  return text
    .split('\n')
    .filter((line) => line !== '')
    .sort();
}

describe('TallyHistogram and TallyCounter', () => {
  it('expose what prom-client would for the same observations, default labels included', async () => {
    const theirs = new prom.Registry();
    const ours = new prom.Registry();
    for (const registry of [theirs, ours]) registry.setDefaultLabels({ process: 'edge' });
    const reference = new prom.Histogram({ name: 'h_seconds', help: 'h', labelNames: ['method', 'status'], buckets: BUCKETS, registers: [theirs] });
    const tally = new TallyHistogram({ name: 'h_seconds', help: 'h', labelNames: ['method', 'status'], buckets: BUCKETS, registers: [ours] });
    const counter = new prom.Counter({ name: 'c_total', help: 'c', labelNames: ['api', 'outcome'], registers: [theirs] });
    const tallyCounter = new TallyCounter({ name: 'c_total', help: 'c', labelNames: ['api', 'outcome'], registers: [ours] });

    // Values on bounds, between them, under the first and past the last.
    const observations: [string, string, number][] = [
      ['GET', '200', 0.0005],
      ['GET', '200', 0.001],
      ['GET', '200', 0.05],
      ['GET', '404', 0.01],
      ['POST', '200', 12],
      ['POST', '200', 1],
      ['GET', '200', 10],
    ];
    for (const [method, status, value] of observations) {
      reference.observe({ method, status }, value);
      tally.observe(`${method} ${status}`, () => ({ method, status }), value);
    }
    for (const [api, outcome, by] of [
      ['a.example', 'charged', 1],
      ['a.example', 'charged', 2],
      ['b.example', 'refunded', 5],
    ] as const) {
      counter.inc({ api, outcome }, by);
      tallyCounter.inc(`${outcome} ${api}`, () => ({ api, outcome }), by);
    }
    const expected = lines(await theirs.metrics());
    expect(expected.length).toBeGreaterThan(20);
    expect(lines(await ours.metrics())).toEqual(expected);

    tally.reset();
    reference.reset();
    tallyCounter.reset();
    counter.reset();
    expect(lines(await ours.metrics())).toEqual(lines(await theirs.metrics()));
  });

  it('makes the labels once per series, not per update', () => {
    const registry = new prom.Registry();
    const tally = new TallyHistogram({ name: 'x_seconds', help: 'x', labelNames: ['route'], buckets: BUCKETS, registers: [registry] });
    let made = 0;
    for (let i = 0; i < 1000; i += 1)
      tally.observe(
        '/a',
        () => {
          made += 1;
          return { route: '/a' };
        },
        i / 1000,
      );
    expect(made).toBe(1);
    const counts = tally.get().values.filter((value) => value.metricName === 'x_seconds_count');
    expect(counts).toEqual([{ labels: { route: '/a' }, value: 1000, metricName: 'x_seconds_count' }]);
    const buckets = tally.get().values.filter((value) => value.metricName === 'x_seconds_bucket');
    expect(buckets.map((value) => [value.labels.le, value.value])).toEqual([
      [0.001, 2],
      [0.01, 11],
      [0.1, 101],
      [1, 1000],
      [10, 1000],
      ['+Inf', 1000],
    ]);
  });
});
