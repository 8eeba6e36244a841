export { callerFromKey, callerFromSession } from './caller.js';
export type { Caller } from './caller.js';
export { SESSION_COOKIE, assertCsrf, assertNotCrossSite, assertSameOrigin, clearSessionCookies, openSession, setSessionCookies, verifySession } from './dashboard-sessions.js';
export { changeKey, listKeys } from './key-management.js';
export { KeyVerifier, keyChangesChannel, publishKeyChange } from './key-verifier.js';
export { PASSWORD_POLICY, assertPasswordPolicy, hashPassword, verifyPassword } from './passwords.js';
export { registerAccount } from './registration.js';
