export { callerFromKey, callerFromSession } from './caller.js';
export type { Caller } from './caller.js';
export { closeDashboardSession, csrfTokenMatches, openDashboardSession, verifyDashboardSession } from './dashboard-sessions.js';
export type { DashboardSession, DashboardSessionSettings } from './dashboard-sessions.js';
export { issueKey } from './key-issuing.js';
export { changeKey, listKeys } from './key-management.js';
export { KeyVerifier, keyChangesChannel, publishKeyChange } from './key-verifier.js';
export { PASSWORD_POLICY, assertPasswordPolicy, hashPassword, verifyPassword } from './passwords.js';
export { registerAccount } from './registration.js';
