import { useState, type FormEvent } from 'react';
import { ApiError, call, client, type Answer } from '../api';
import { formatDateTime } from '../format';
import { useSession } from '../session';
import { Badge, Card, ConfirmButton, Empty, ErrorMessage, Notice, PageHeader, Spinner, useAction, useApi } from '../ui';

/** An approver of the account, as GET /api/v1/members lists it (`invited`: the e-mail is out and not accepted yet). */
export type Member = Answer<'/api/v1/members'>['members'][number];

/**
 * The daily allowance of invitation e-mails: the server says how many (its message) and when
 * (Retry-After), better than a generic "too many"; its hint, which names the operator's setting, is not shown.
 */
function dailyAllowanceError(caught: unknown): unknown {
  if (!(caught instanceof ApiError && caught.status === 429)) return caught;
  const hours = caught.retryAfterSeconds ? Math.ceil(caught.retryAfterSeconds / 3600) : null;
  const wait = hours ? ` Try again in ${hours} hour${hours === 1 ? '' : 's'}; the people already invited can still accept.` : '';
  return new Error(`${caught.message}.${wait}`);
}

function InviteForm({ onInvited }: { onInvited: (member: Member) => void }) {
  const [email, setEmail] = useState('');
  const { busy, error, run } = useAction();
  const submit = async (event: FormEvent) => {
    event.preventDefault();
    await run(async () => {
      try {
        const created = await call(client.POST('/api/v1/members', { body: { email: email.trim() } }));
        setEmail('');
        onInvited(created.member);
      } catch (caught) {
        if (caught instanceof ApiError && caught.status === 409) {
          throw new Error(
            `${email.trim()} is already invited to or an approver of this account, or is its own address. To send a pending invitation again, use Resend invitation in the list below.`,
          );
        }
        throw dailyAllowanceError(caught);
      }
    });
  };
  return (
    <>
      <form className="inline-form" onSubmit={submit}>
        <label className="field field-grow">
          <span className="field-label">Email address</span>
          <input
            type="email"
            name="email"
            autoComplete="off"
            value={email}
            onChange={(e) => setEmail(e.target.value)}
            required
            maxLength={254}
            placeholder="e.g. reviewer@example.com"
          />
        </label>
        <button type="submit" className="button button-primary" disabled={busy}>
          {busy ? 'Sending…' : 'Send invitation'}
        </button>
      </form>
      <ErrorMessage error={error} />
    </>
  );
}

function MemberRow({ member, onChanged, onMessage }: { member: Member; onChanged: () => void; onMessage: (message: string) => void }) {
  const { busy, error, run } = useAction();
  const invited = member.status === 'invited';
  return (
    <li className="key-item" data-testid="approver-row">
      <div className="key-main">
        <p className="key-name">
          {member.email} <Badge tone={invited ? 'amber' : 'green'}>{invited ? 'Invited' : 'Active'}</Badge>
        </p>
        <p className="key-meta">
          invited {formatDateTime(member.invitedAt)} · {member.acceptedAt ? `accepted ${formatDateTime(member.acceptedAt)}` : 'not accepted yet'}
        </p>
        <ErrorMessage error={error} />
      </div>
      <div className="key-actions">
        {invited && (
          <button
            type="button"
            className="button button-small"
            disabled={busy}
            aria-label={`Resend invitation to ${member.email}`}
            onClick={() =>
              void run(async () => {
                await call(client.POST('/api/v1/members/{memberId}/resend-invite', { params: { path: { memberId: member.id } } })).catch(
                  (caught: unknown) => {
                    throw dailyAllowanceError(caught);
                  },
                );
                onMessage(`The invitation went to ${member.email} again. The link in the earlier e-mail no longer works.`);
                onChanged();
              })
            }
          >
            Resend invitation
          </button>
        )}
        <ConfirmButton
          label="Remove"
          confirmLabel="Yes, remove"
          question={`Remove ${member.email}? ${invited ? 'The invitation link stops working.' : 'They are signed out at once and cannot sign in again.'} Steps assigned to them go back to any approver.`}
          onConfirm={() =>
            run(async () => {
              await call(client.DELETE('/api/v1/members/{memberId}', { params: { path: { memberId: member.id } } }));
              onMessage(`${member.email} is no longer an approver.`);
              onChanged();
            })
          }
        />
      </div>
    </li>
  );
}

/** The owner's page for approvers: invite by e-mail, see who accepted, resend, remove. */
export function ApproversPage() {
  const { expired } = useSession();
  const members = useApi('members', (signal) => client.GET('/api/v1/members', { signal }), expired);
  const [message, setMessage] = useState<string | null>(null);
  const list = members.data?.members ?? [];

  return (
    <>
      <PageHeader
        title="Approvers"
        description="Approvers are people you invite by e-mail to see and complete this account's human steps in the Inbox; they cannot see or change keys, funds, usage, connections or the directory, and cannot start sessions."
      />
      {message && <Notice tone="success">{message}</Notice>}
      <Card title="Invite an approver">
        <p className="muted">
          They get an e-mail with a link to choose a password (or, if they already sign in to Service, to add this account to their login). The link
          works once and for a limited time; you can send a fresh one from the list below. The e-mail does not name you: say it is coming.
        </p>
        <InviteForm
          onInvited={(member) => {
            setMessage(`Invitation sent to ${member.email}.`);
            members.reload();
          }}
        />
      </Card>
      <Card title="Approvers of this account">
        {members.loading && !members.data && <Spinner label="Loading approvers" />}
        <ErrorMessage error={members.error} onRetry={members.reload} />
        {members.data && list.length === 0 && <Empty title="No approvers yet">Invite someone above to share the inbox with them.</Empty>}
        {list.length > 0 && (
          <ul className="key-list" aria-label="Approvers">
            {list.map((member) => (
              <MemberRow key={member.id} member={member} onChanged={members.reload} onMessage={setMessage} />
            ))}
          </ul>
        )}
      </Card>
    </>
  );
}
