import { request as httpRequest, type IncomingMessage } from 'node:http';
import { TestWorkflowEnvironment } from '@temporalio/testing';
// The fixtures tests share with the benchmarks live in packages/fixtures; SSE parsing is test-only.
export {
  createTestApi,
  quietTemporalRuntime,
  startWorker,
  terminateRunningSessions,
  workflowBundle,
  workflowsPath,
  type RunningWorker,
} from '#fixtures/temporal';

export interface SseEvent {
  id: string | null;
  event: string;
  data: unknown;
}

export interface SseClient {
  response: IncomingMessage;
  events: SseEvent[];
  comments: string[];
  /** Resolves when the server ends the stream. */
  ended: Promise<void>;
  /** Resolves once `count` events have arrived (or rejects after the timeout). */
  waitFor(count: number, timeoutMs?: number): Promise<SseEvent[]>;
  close(): void;
}

/** Opens an SSE stream with a real HTTP connection and parses its frames as they arrive. */
export function openSse(baseUrl: string, path: string, headers: Record<string, string>): Promise<SseClient> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(new URL(path, baseUrl), { headers: { accept: 'text/event-stream', ...headers } }, (response) => {
      const events: SseEvent[] = [];
      const comments: string[] = [];
      const waiters: { count: number; resolve: (events: SseEvent[]) => void }[] = [];
      let buffer = '';
      const notify = () => {
        for (const waiter of [...waiters]) {
          if (events.length >= waiter.count) {
            waiters.splice(waiters.indexOf(waiter), 1);
            waiter.resolve(events.slice());
          }
        }
      };
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => {
        buffer += chunk;
        let end: number;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const frame = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          let id: string | null = null;
          let event = 'message';
          const data: string[] = [];
          for (const line of frame.split('\n')) {
            if (line.startsWith(':')) comments.push(line.slice(1).trim());
            else if (line.startsWith('id: ')) id = line.slice(4);
            else if (line.startsWith('event: ')) event = line.slice(7);
            else if (line.startsWith('data: ')) data.push(line.slice(6));
          }
          if (data.length > 0) events.push({ id, event, data: JSON.parse(data.join('\n')) });
        }
        notify();
      });
      const ended = new Promise<void>((done) => {
        response.on('end', () => done());
        response.on('close', () => done());
      });
      resolve({
        response,
        events,
        comments,
        ended,
        waitFor(count, timeoutMs = 15_000) {
          if (events.length >= count) return Promise.resolve(events.slice());
          return new Promise((done, fail) => {
            const timer = setTimeout(
              () => fail(new Error(`expected ${count} events, got ${events.length}: ${events.map((e) => e.event).join(', ')}`)),
              timeoutMs,
            );
            waiters.push({
              count,
              resolve: (seen) => {
                clearTimeout(timer);
                done(seen);
              },
            });
          });
        },
        close() {
          req.destroy();
        },
      });
    });
    req.on('error', reject);
    req.end();
  });
}

/**
 * Temporal's time-skipping test server (TEMPORAL_TEST_SERVER_PATH), started for one test file. Its SDK
 * gives the binary 5 s to answer and cannot be told otherwise; on two busy cores (a full suite, Chromium
 * and the workers beside it) it once missed that. A start that timed out is tried again, twice at most;
 * any other failure is thrown at once.
 */
export async function startTimeSkippingServer(): Promise<TestWorkflowEnvironment> {
  const path = process.env.TEMPORAL_TEST_SERVER_PATH;
  if (!path) throw new Error('TEMPORAL_TEST_SERVER_PATH is not set: run the suite with npm test (scripts/test.sh installs the test server)');
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await TestWorkflowEnvironment.createTimeSkipping({ server: { executable: { type: 'existing-path', path } } });
    } catch (error) {
      if (attempt >= 3 || !/did not start within/.test(String((error as Error).message))) throw error;
    }
  }
}
