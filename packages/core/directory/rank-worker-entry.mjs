// The ranking worker thread's entry (see rank-pool.ts). The edge's TypeScript runs through tsx, whose
// loader a worker thread registers for itself (the parent's flags are not passed on: under a test
// runner they are not tsx's).
import { register } from 'tsx/esm/api';

register();
await import('./rank-worker.ts');
