export { billingMode, mintsMoneyInProduction, signupCreditMicros } from './billing-policy.js';
export { ChargeBatcher } from './charge-batcher.js';
export { PLATFORM_USAGE_API, chargeCall, parseMaxCost } from './charging.js';
export type { ChargeReceipt, PricedCall } from './charging.js';
export { reconcileRefunds, reconcileRefundsJob, refundChargeJob, refundOrQueue } from './refunds.js';
export { topUp } from './topups.js';
export { usageBatchJob } from './usage-job.js';
export { UsageRecorder } from './usage-recorder.js';
