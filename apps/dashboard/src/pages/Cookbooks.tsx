import { useState, type FormEvent } from 'react';
import { call, client, type Answer } from '../api';
import { Link, navigate } from '../router';
import { useSession } from '../session';
import { Badge, Card, Empty, ErrorMessage, PageHeader, Spinner, useAction, useApi } from '../ui';

type CookbookSummary = Answer<'/api/v1/cookbooks'>['cookbooks'][number];
type Slot = CookbookSummary['slots'][number];

/** A category as a person reads it: "developer_tools" is "developer tools". */
const categoryText = (category: string) => category.replaceAll('_', ' ');

/** The callable-now APIs of a slot's category, offered as choices (any callable API id may be typed instead). */
function SlotField({ cookbookId, slot, value, onChange }: { cookbookId: string; slot: Slot; value: string; onChange: (value: string) => void }) {
  const choices = useApi(JSON.stringify(['apis', 'callable', slot.category]), (signal) =>
    client.GET('/api/v1/apis', { params: { query: { category: slot.category, callable: 'true', limit: 50 } }, signal }),
  );
  const listId = `slot-${cookbookId}-${slot.name}`;
  const first = choices.data?.apis[0];
  return (
    <label className="field">
      <span className="field-label">
        API for “{slot.name}” {slot.required ? '' : <span className="muted">(optional)</span>}
      </span>
      <input
        list={listId}
        value={value}
        placeholder={first ? `e.g. ${first.id}` : 'an API id from the directory'}
        onChange={(e) => onChange(e.target.value)}
      />
      <datalist id={listId}>
        {(choices.data?.apis ?? []).map((api) => (
          <option key={api.id} value={api.id}>
            {api.name}
          </option>
        ))}
      </datalist>
      <span className="field-help">
        {choices.data && choices.data.apis.length === 0
          ? `You cannot call any API for “${categoryText(slot.category)}” yet: connect one on the Connections page, or enter another API you can call.`
          : `An API for “${categoryText(slot.category)}” that you can call now.`}
      </span>
    </label>
  );
}

function StartForm({ cookbook, onCancel }: { cookbook: CookbookSummary; onCancel: () => void }) {
  const [chosen, setChosen] = useState<Record<string, string>>({});
  const { busy, error, run } = useAction();
  const submit = (event: FormEvent) => {
    event.preventDefault();
    void run(async () => {
      const selectedApis = Object.fromEntries(
        Object.entries(chosen)
          .filter(([, apiId]) => apiId.trim() !== '')
          .map(([slot, apiId]) => [slot, apiId.trim()]),
      );
      const started = await call(
        client.POST('/api/v1/cookbooks/{id}/start', { params: { path: { id: cookbook.id }, header: {} }, body: { selectedApis } }),
      );
      navigate(`/sessions/${encodeURIComponent(started.session.sessionId)}`);
    });
  };
  return (
    <form className="stack" onSubmit={submit} aria-label={`Start ${cookbook.title}`}>
      {cookbook.slots.map((slot) => (
        <SlotField
          key={slot.name}
          cookbookId={cookbook.id}
          slot={slot}
          value={chosen[slot.name] ?? ''}
          onChange={(value) => setChosen((previous) => ({ ...previous, [slot.name]: value }))}
        />
      ))}
      <p className="small muted">
        The session then waits for an agent with one of your keys to do its steps; the steps that need a person come to your Inbox.
      </p>
      <div className="button-row">
        <button type="submit" className="button button-primary" disabled={busy}>
          {busy ? 'Starting…' : 'Start session'}
        </button>
        <button type="button" className="button" onClick={onCancel}>
          Cancel
        </button>
      </div>
      <ErrorMessage error={error} />
    </form>
  );
}

function CookbookCard({ cookbook }: { cookbook: CookbookSummary }) {
  const [starting, setStarting] = useState(false);
  const agentSteps = cookbook.stepCount - cookbook.humanSteps;
  return (
    <article className="card" data-testid="cookbook" aria-labelledby={`cookbook-${cookbook.id}`}>
      <header className="card-header">
        <div>
          <p className="eyebrow">{categoryText(cookbook.category)}</p>
          <h2 id={`cookbook-${cookbook.id}`}>{cookbook.title}</h2>
        </div>
        {!starting && (
          <div className="card-actions">
            <button type="button" className="button button-small button-primary" onClick={() => setStarting(true)}>
              Start…
            </button>
          </div>
        )}
      </header>
      <p>{cookbook.description}</p>
      <dl className="facts">
        <div>
          <dt>APIs it needs</dt>
          <dd data-testid="cookbook-apis">
            {cookbook.slots.length === 0
              ? 'None'
              : cookbook.slots.map((slot) => (
                  <span key={slot.name} className="chip">
                    {slot.name}: an API for “{categoryText(slot.category)}”{slot.required ? '' : ' (optional)'}
                  </span>
                ))}
          </dd>
        </div>
        <div>
          <dt>Steps</dt>
          <dd data-testid="cookbook-steps">
            {agentSteps} for an agent, {cookbook.humanSteps === 0 ? 'none for a person' : `${cookbook.humanSteps} for a person`}{' '}
            {cookbook.humanSteps > 0 && <Badge tone="blue">Needs a person</Badge>}
          </dd>
        </div>
      </dl>
      {starting && <StartForm cookbook={cookbook} onCancel={() => setStarting(false)} />}
    </article>
  );
}

/**
 * Every cookbook: what it is for, which APIs it needs (one per slot), how many of its steps need a
 * person, and a form to start a session with the APIs chosen. Agents start them too, with their key.
 */
export function CookbooksPage() {
  const { expired } = useSession();
  const list = useApi('cookbooks', (signal) => client.GET('/api/v1/cookbooks', { params: { query: { limit: 200 } }, signal }), expired);
  return (
    <>
      <PageHeader
        title="Cookbooks"
        description={
          <>
            Guided procedures an agent runs step by step, stopping for a person where a cookbook says so. Running ones are under{' '}
            <Link href="/sessions">Sessions</Link>; steps waiting for you are in the <Link href="/inbox">Inbox</Link>.
          </>
        }
      />
      {list.loading && !list.data && <Spinner label="Loading cookbooks" />}
      <ErrorMessage error={list.error} onRetry={list.reload} />
      {list.data && list.data.cookbooks.length === 0 && (
        <Card>
          <Empty title="No cookbooks yet">The operator has not published any cookbooks.</Empty>
        </Card>
      )}
      <div className="stack">
        {(list.data?.cookbooks ?? []).map((cookbook) => (
          <CookbookCard key={cookbook.id} cookbook={cookbook} />
        ))}
      </div>
    </>
  );
}
