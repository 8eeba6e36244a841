export { billingMode, mintsMoneyInProduction, signupCreditMicros } from './billing-policy.js';
export { ChargeBatcher } from './charge-batcher.js';
export { CreditReservations } from './credit-reservations.js';
export type { CreditReservationOptions } from './credit-reservations.js';
export { PAYMENT_HINT, PLATFORM_USAGE_API, assertCallAllowed, chargeCall, parseMaxCost, recordPricedItem } from './charging.js';
export type { ChargeReceipt, PricedCall, UsageSink } from './charging.js';
export { reconcileRefunds, reconcileRefundsJob, refundChargeJob, refundOrQueue } from './refunds.js';
export type { RefundOutcome } from './refunds.js';
export { topUp } from './topups.js';
export { usageBatchJob } from './usage-job.js';
export { UsageRecorder } from './usage-recorder.js';
export { BalanceAlerts } from './balance-alerts.js';
export type { BalanceAlert } from './balance-alerts.js';
export { applyStripeEvent, createStripe, startCheckout, stripeSettings, verifyStripeEvent } from './stripe-topups.js';
export type { StripeSettings } from './stripe-topups.js';
export {
  atomicAmount,
  createFacilitator,
  decodePayment,
  mismatch,
  paymentRequiredHeader,
  requirementsFor,
  x402Enabled,
  x402Settings,
} from './x402.js';
export type { PresentedPayment, X402Settings } from './x402.js';
export { autoTopupJob, chargeAutoTopup, reconcileAutoTopups, reconcileAutoTopupsJob, requestAutoTopup, startAutoTopupSetup } from './auto-topup.js';
export type { AutoTopupOutcome } from './auto-topup.js';
export {
  accountBalance,
  autoTopupSettings,
  changeLowBalanceThreshold,
  configureAutoTopup,
  lowBalanceThreshold,
  settleBalanceAlertState,
} from './balance.js';
export type { AutoTopupRow } from './balance.js';
export { apiUsageReport, usageStats, usageSummary } from './usage-reports.js';
export type { UsageTotals } from './usage-reports.js';
export {
  ActivityTail,
  presentActivity,
  readActivity,
  readStatement,
  redactCallPath,
  statementCsv,
  storeUsageEvents,
  STATEMENT_CSV_COLUMNS,
} from './activity.js';
export type { ActivityEntry, ActivityQuery, StatementEntry, StatementQuery, StatementSummary } from './activity.js';
