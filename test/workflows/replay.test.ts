import { cpSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Resource } from '@opentelemetry/resources';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { makeWorkflowExporter, type OpenTelemetrySinks } from '@temporalio/interceptors-opentelemetry';
import { bundleWorkflowCode, Worker, type InjectedSinks, type ReplayResult, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { afterAll, describe, expect, it } from 'vitest';
import { DEV_CODEC_KEYS, parseCodecKeys, temporalDataConverter } from '#core/platform';
import { readRecordedHistories } from '#fixtures/histories';
import { quietTemporalRuntime, workflowBundle } from '../helpers/cookbooks.js';
import { uniqueId } from '../helpers/settings.js';

// Sessions wait days on people, so a deploy meets workflows started by older code. Each recorded
// history (test/fixtures/histories, written by `npm run record:histories`) is replayed against the
// workflow code as it is now: a change that would make an open session non-deterministic fails here.
// The recordings were encrypted with the public development codec key.

const recordings = readRecordedHistories();
const dataConverter = temporalDataConverter(parseCodecKeys(DEV_CODEC_KEYS));
const silent = { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} };

async function replayAll(bundle: WorkflowBundleWithSourceMap, sinks?: InjectedSinks<OpenTelemetrySinks>): Promise<Map<string, ReplayResult>> {
  quietTemporalRuntime();
  const results = new Map<string, ReplayResult>();
  const byWorkflowId = new Map(recordings.map((recording) => [recording.workflowId, recording.name]));
  const histories = recordings.map(({ workflowId, history }) => ({ workflowId, history }));
  const options = { workflowBundle: bundle, dataConverter, replayName: uniqueId('replay-'), ...(sinks ? { sinks } : {}) };
  for await (const result of Worker.runReplayHistories(options, histories)) {
    results.set(byWorkflowId.get(result.workflowId)!, result);
  }
  return results;
}

/** The workflow sources copied to a scratch folder with one edit, bundled like the real ones. */
const mutants: string[] = [];
async function bundleWithEdit(edit: (source: string) => string): Promise<WorkflowBundleWithSourceMap> {
  const source = fileURLToPath(new URL('../../workflows', import.meta.url));
  const dir = fileURLToPath(new URL(`../../.data/replay-mutants/${uniqueId('m')}`, import.meta.url));
  mkdirSync(dir, { recursive: true });
  mutants.push(dir);
  cpSync(source, dir, { recursive: true });
  const file = join(dir, 'cookbook-session.ts');
  const before = readFileSync(file, 'utf8');
  const after = edit(before);
  expect(after, 'the edit must change the workflow').not.toBe(before);
  expect(after, 'the edit must add the timer').toContain('probeSleep(1);');
  writeFileSync(file, after);
  return bundleWorkflowCode({ workflowsPath: join(dir, 'index.ts'), logger: silent });
}
afterAll(() => {
  for (const dir of mutants) rmSync(dir, { recursive: true, force: true });
});

/** A new command (a timer) before the session's first record: every recorded history diverges there. */
const START = "      this.emit('session.started',";
const addTimer = (guard: string | null) => (source: string) =>
  source
    // Both names imported under aliases of the test's own, whatever the workflow imports already.
    .replace(
      "} from '@temporalio/workflow';",
      "} from '@temporalio/workflow';\nimport { patched as probePatched, sleep as probeSleep } from '@temporalio/workflow';",
    )
    .replace(START, `${guard === null ? '      await probeSleep(1);' : `      if (probePatched('${guard}')) await probeSleep(1);`}\n${START}`);

describe('workflow versioning: recorded histories replay against the current code', () => {
  it('has recordings of every ending and step kind', () => {
    const names = recordings.map((recording) => recording.name.split('/')[1]);
    for (const scenario of [
      'completed-agent-and-human',
      'reminded-then-completed',
      'expired-human-step',
      'cancelled-waiting-for-human',
      'failed-account-gone',
      'open-waiting-for-human',
      // Recorded after human-step decisions came (behind patched('human-step-decisions')).
      'rejected-by-person',
      'changes-requested-then-completed',
      // Recorded after a refused transition began to end the session (behind patched('record-session-failures')).
      'failed-data-refused',
    ]) {
      expect(names).toContain(`${scenario}.json`);
    }
  });

  it('replays every recorded history without a determinism error', async () => {
    const results = await replayAll(await workflowBundle());
    expect(results.size).toBe(recordings.length);
    for (const [name, result] of results) expect(result.error, `${name}: ${String(result.error)}`).toBeUndefined();
  });

  it("replays them with tracing's workflow interceptors bundled: switching tracing on leaves open sessions deterministic", async () => {
    const exporter = makeWorkflowExporter(new SimpleSpanProcessor(new InMemorySpanExporter()), new Resource({ 'service.name': 'replay' }));
    const results = await replayAll(await workflowBundle(true), { exporter });
    expect(results.size).toBe(recordings.length);
    for (const [name, result] of results) expect(result.error, `${name}: ${String(result.error)}`).toBeUndefined();
  });

  it('fails when the workflow changes its commands without a patch, and passes when the change is behind patched()', async () => {
    const unguarded = await replayAll(await bundleWithEdit(addTimer(null)));
    expect(unguarded.size).toBe(recordings.length);
    for (const [name, result] of unguarded) {
      expect(result.error, name).toBeDefined();
      expect(result.error!.name, `${name}: ${String(result.error)}`).toBe('DeterminismViolationError');
    }
    const guarded = await replayAll(await bundleWithEdit(addTimer('replay-test-probe')));
    expect(guarded.size).toBe(recordings.length);
    for (const [name, result] of guarded) expect(result.error, `${name}: ${String(result.error)}`).toBeUndefined();
  });
});
