import type { HumanStepContext } from './sessions-data';

/** "firstInvoiceCents" → "First invoice cents". */
export function fieldLabel(name: string): string {
  const words = name
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .replace(/[_-]+/g, ' ')
    .trim()
    .toLowerCase();
  return words.charAt(0).toUpperCase() + words.slice(1);
}

/** Only http(s) links become links; anything else (javascript:, data:) stays text. */
function safeUrl(text: string): string | null {
  if (!/^https?:\/\//i.test(text)) return null;
  try {
    const url = new URL(text);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url.href : null;
  } catch {
    return null;
  }
}

/** One value of an earlier step's result, readable: text keeps its line breaks, lists are lists, objects are labelled fields. */
export function ContextValue({ value, depth = 0 }: { value: unknown; depth?: number }) {
  if (value === null || value === undefined) return <span className="muted">not given</span>;
  if (typeof value === 'string') {
    const href = safeUrl(value);
    if (href) {
      return (
        <a href={href} target="_blank" rel="noopener noreferrer nofollow">
          {value}
        </a>
      );
    }
    return <span className="context-text">{value}</span>;
  }
  if (typeof value === 'number' || typeof value === 'bigint') return <span>{value.toLocaleString()}</span>;
  if (typeof value === 'boolean') return <span>{value ? 'yes' : 'no'}</span>;
  if (depth > 4) return <code>{JSON.stringify(value)}</code>;
  if (Array.isArray(value)) {
    if (value.length === 0) return <span className="muted">none</span>;
    return (
      <ul className="context-list">
        {value.map((item, index) => (
          <li key={index}>
            <ContextValue value={item} depth={depth + 1} />
          </li>
        ))}
      </ul>
    );
  }
  const entries = Object.entries(value as Record<string, unknown>);
  if (entries.length === 0) return <span className="muted">empty</span>;
  return (
    <dl className="context-fields">
      {entries.map(([name, item]) => (
        <div key={name}>
          <dt>{fieldLabel(name)}</dt>
          <dd>
            <ContextValue value={item} depth={depth + 1} />
          </dd>
        </div>
      ))}
    </dl>
  );
}

/** What the person needs from earlier steps, grouped by step, before the form that decides. */
export function StepContext({ context }: { context: HumanStepContext[] }) {
  if (context.length === 0) return null;
  return (
    <section className="step-context" aria-label="From earlier steps" data-testid="step-context">
      {context.map((entry) => (
        <div key={entry.stepId} className="step-context-group">
          <h3 className="eyebrow">{entry.title}</h3>
          <dl className="context-fields">
            {entry.fields.map((field) => (
              <div key={field.name}>
                <dt>
                  {fieldLabel(field.name)}
                  {Array.isArray(field.value) ? ` (${field.value.length})` : ''}
                </dt>
                <dd>
                  <ContextValue value={field.value} />
                </dd>
              </div>
            ))}
          </dl>
        </div>
      ))}
    </section>
  );
}
