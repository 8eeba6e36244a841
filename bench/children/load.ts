// The load generator of the proxy scenario, run as its own process (argument: JSON options).
// - mode "peak": autocannon, `connections` keep-alive connections in a closed loop for `seconds`;
//   each connection sends its own header set (e.g. its own API key).
// - mode "rate": open loop at a fixed `rate` (requests/s), wrk2-style: request i is due at
//   start + i/rate and its latency is measured from that due time, so a stall of the server is
//   counted against every request that should have gone out during it (no coordinated omission).
// Prints one JSON line: { rps, p50, p99, ok, sent, errors } (latencies in ms).
import autocannon from 'autocannon';
import { Pool } from 'undici';

interface Options {
  mode: 'peak' | 'rate';
  origin: string;
  path: string;
  connections: number;
  seconds: number;
  rate?: number;
  /** One header set per client; clients (peak) or requests (rate) take them round-robin. */
  headers: Array<Record<string, string>>;
}

const options = JSON.parse(process.argv[2] ?? '{}') as Options;
const headerSets = options.headers.length ? options.headers : [{}];

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

async function peak() {
  const latencies: number[] = [];
  let client = 0;
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon(
      {
        url: `${options.origin}${options.path}`,
        connections: options.connections,
        duration: options.seconds,
        setupClient: (c) => c.setHeaders(headerSets[client++ % headerSets.length]!),
      },
      (error, done) => (error ? reject(error) : resolve(done)),
    );
    instance.on('response', (_c, status, _bytes, responseTime) => {
      if (status >= 200 && status < 300) latencies.push(responseTime);
    });
  });
  latencies.sort((a, b) => a - b);
  return {
    rps: result['2xx'] / result.duration,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    ok: result['2xx'],
    sent: result.requests.sent,
    errors: result.errors + result.timeouts + result.non2xx,
  };
}

async function rate() {
  const rps = options.rate ?? 100;
  const total = Math.round(rps * options.seconds);
  const interval = 1000 / rps;
  const pool = new Pool(options.origin, { connections: options.connections, keepAliveTimeout: 30_000 });
  // Warm the connections so the first due requests do not pay for the TCP handshakes.
  let warmOk = 0;
  await Promise.all(
    Array.from({ length: options.connections }, async (_, i) => {
      const res = await pool.request({ method: 'GET', path: options.path, headers: headerSets[i % headerSets.length] });
      await res.body.dump();
      if (res.statusCode >= 200 && res.statusCode < 300) warmOk += 1;
    }),
  );
  const latencies: number[] = [];
  let errors = 0;
  let sent = 0;
  const inflight = new Set<Promise<void>>();
  const start = performance.now();
  await new Promise<void>((resolve) => {
    const tick = () => {
      const now = performance.now();
      while (sent < total && start + sent * interval <= now) {
        const due = start + sent * interval;
        const headers = headerSets[sent % headerSets.length];
        sent += 1;
        const p: Promise<void> = pool
          .request({ method: 'GET', path: options.path, headers })
          .then(async (res) => {
            await res.body.dump();
            if (res.statusCode >= 200 && res.statusCode < 300) latencies.push(performance.now() - due);
            else errors += 1;
          })
          .catch(() => {
            errors += 1;
          })
          .finally(() => inflight.delete(p));
        inflight.add(p);
      }
      if (sent < total) setTimeout(tick, Math.max(0, start + sent * interval - performance.now()));
      else resolve();
    };
    tick();
  });
  await Promise.all(inflight);
  const elapsed = (performance.now() - start) / 1000;
  await pool.close();
  latencies.sort((a, b) => a - b);
  // ok and sent include the warm-up requests (they were charged too); rps and latencies do not.
  return {
    rps: latencies.length / elapsed,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    ok: latencies.length + warmOk,
    sent: sent + options.connections,
    errors,
  };
}

const result = options.mode === 'peak' ? await peak() : await rate();
console.log(JSON.stringify(result));
