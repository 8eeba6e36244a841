export { ChargeBatcher } from './charge-batcher.js';
export { chargeRequest } from './charging.js';
export type { ChargeReceipt } from './charging.js';
export { topUp } from './topups.js';
export { UsageRecorder } from './usage-recorder.js';
