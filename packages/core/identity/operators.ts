import { getPerson } from '#db/people';
import type { Db } from '#db/sql';
import type { Caller } from './caller.js';

/** OPERATOR_EMAILS as a set of lower-case addresses (comma or space separated); empty when unset. */
export function operatorEmails(setting: string | undefined): Set<string> {
  return new Set(
    (setting ?? '')
      .split(/[\s,]+/)
      .map((email) => email.trim().toLowerCase())
      .filter((email) => email !== ''),
  );
}

/**
 * Whether the caller is a person the operator named in OPERATOR_EMAILS, signed in to the dashboard:
 * only they are shown the operator's own tools (the Temporal UI). Keys never are.
 */
export async function isOperatorPerson(sql: Db, caller: Caller, operators: Set<string>): Promise<boolean> {
  if (operators.size === 0 || caller.via !== 'cookie' || caller.personId === null) return false;
  const person = await getPerson(sql, caller.personId);
  return person !== null && operators.has(person.email.toLowerCase());
}
