export { callerFromKey, callerFromSession } from './caller.js';
export type { Caller } from './caller.js';
export { closeDashboardSession, csrfTokenMatches, openDashboardSession, verifyDashboardSession } from './dashboard-sessions.js';
export type { DashboardSession, DashboardSessionSettings } from './dashboard-sessions.js';
export { issueKey } from './key-issuing.js';
export { changeKey, listKeys } from './key-management.js';
export type { KeyRow } from '#db/keys';
export { KeyVerifier, assertKeyUsable, keyChangesChannel, publishKeyChange } from './key-verifier.js';
export { PASSWORD_POLICY, assertPasswordPolicy, hashPassword, verifyPassword } from './passwords.js';
export { registerAccount } from './registration.js';
export { acceptInvitation, inviteMember, listApprovers, memberView, mintInviteLink, removeApprover, requireApprover } from './members.js';
export { claimInviteSend } from './invite-quota.js';
export { LoginThrottle } from './login-throttle.js';
export type { LoginThrottleSettings } from './login-throttle.js';
export { authenticatePerson, callerIdentity, listMemberships, personIdByEmail } from './people.js';
export type { MembershipRow, PersonRow } from './people.js';
export type { MemberView } from './members.js';
export { changePassword, claimPasswordResetSend, listPersonSessions, mintPasswordResetLink, resetPassword, signOutPerson } from './password-reset.js';
export type { DashboardSessionRow } from '#db/dashboard-sessions';
export { CHECKLIST_ITEMS, firstUseChecklist, markChecklist, noteDiscovery } from './first-use.js';
export type { ChecklistItemId, FirstUseChecklist } from './first-use.js';
export { isOperatorPerson, operatorEmails } from './operators.js';
export {
  accountOverview,
  assertEmailVerified,
  cancelEmailChange,
  claimAccountEmail,
  confirmEmailChange,
  markPersonVerified,
  mintEmailChangeLink,
  mintVerificationLink,
  ownerEmailState,
  personEmailState,
  requestEmailChange,
  verifyEmail,
} from './account-email.js';
export type { PersonEmailState } from '#db/people';
export { deleteOwnedAccount, deletedAccountEmail } from './account-deletion.js';
export type { DeletedAccount } from './account-deletion.js';
