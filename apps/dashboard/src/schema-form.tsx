import { useId, useState, type FormEvent } from 'react';
import { describeError } from './api';

/** The part of JSON Schema a human step's inputSchema uses: an object of simple fields. */
export interface FieldSchema {
  type?: string | string[];
  title?: string;
  description?: string;
  enum?: unknown[];
  default?: unknown;
  minimum?: number;
  maximum?: number;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  format?: string;
  items?: FieldSchema;
}

export interface ObjectSchema {
  type?: string;
  properties?: Record<string, FieldSchema>;
  required?: string[];
}

type FieldKind = 'string' | 'number' | 'integer' | 'boolean' | 'enum' | 'text' | 'list';

function kindOf(field: FieldSchema): FieldKind {
  if (Array.isArray(field.enum) && field.enum.length > 0) return 'enum';
  const type = Array.isArray(field.type) ? field.type.find((t) => t !== 'null') : field.type;
  if (type === 'number' || type === 'integer' || type === 'boolean') return type;
  if (type === 'array') return 'list';
  if (type === 'string' && (field.maxLength === undefined || field.maxLength > 200) && field.format === undefined && field.pattern === undefined) return 'text';
  return 'string';
}

const labelFor = (name: string, field: FieldSchema) =>
  field.title ?? name.replace(/([a-z])([A-Z])/g, '$1 $2').replaceAll('_', ' ').replace(/^./, (c) => c.toUpperCase());

const INPUT_TYPES: Record<string, string> = { email: 'email', uri: 'url', url: 'url', date: 'date', 'date-time': 'datetime-local' };

/** Turns the form's strings into the JSON values the schema asks for; empty optional fields are left out. */
export function toResultData(schema: ObjectSchema, values: Record<string, string | boolean>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, field] of Object.entries(schema.properties ?? {})) {
    const value = values[name];
    const kind = kindOf(field);
    if (kind === 'boolean') {
      out[name] = value === true;
      continue;
    }
    if (typeof value !== 'string' || value === '') continue;
    if (kind === 'number' || kind === 'integer') out[name] = Number(value);
    else if (kind === 'list') {
      const itemType = field.items?.type;
      const items = value
        .split(/[\n,]/)
        .map((item) => item.trim())
        .filter(Boolean);
      out[name] = itemType === 'number' || itemType === 'integer' ? items.map(Number) : items;
    }
    else if (kind === 'enum') out[name] = field.enum?.find((option) => String(option) === value) ?? value;
    else if (field.format === 'date-time') out[name] = new Date(value).toISOString();
    else out[name] = value;
  }
  return out;
}

/**
 * A form generated from a human step's inputSchema: strings (single or multi-line, with format
 * hints), numbers, integers, booleans and enums, with required fields marked and checked by the
 * browser. The server validates again and its error is shown as a sentence.
 */
export function SchemaForm({
  schema,
  submitLabel,
  onSubmit,
}: {
  schema: ObjectSchema;
  submitLabel: string;
  onSubmit: (resultData: Record<string, unknown>) => Promise<void>;
}) {
  const id = useId();
  const required = new Set(schema.required ?? []);
  // Required fields first (stored schemas do not keep their authors' key order), then the rest.
  const properties = Object.entries(schema.properties ?? {}).sort(([a], [b]) => Number(required.has(b)) - Number(required.has(a)));
  const [values, setValues] = useState<Record<string, string | boolean>>(() =>
    Object.fromEntries(
      properties.map(([name, field]) => [name, kindOf(field) === 'boolean' ? field.default === true : field.default === undefined ? '' : String(field.default)]),
    ),
  );
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const set = (name: string, value: string | boolean) => setValues((previous) => ({ ...previous, [name]: value }));

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await onSubmit(toResultData(schema, values));
    } catch (caught) {
      setError(caught);
    } finally {
      setBusy(false);
    }
  };

  return (
    <form className="schema-form" onSubmit={submit}>
      {properties.length === 0 && <p className="muted">This step needs no input: confirm when it is done.</p>}
      {properties.map(([name, field]) => {
        const fieldId = `${id}-${name}`;
        const kind = kindOf(field);
        const isRequired = required.has(name);
        const label = (
          <span className="field-label">
            {labelFor(name, field)}
            {isRequired ? (
              <span className="required" aria-hidden="true">
                {' '}
                *
              </span>
            ) : (
              <span className="optional"> (optional)</span>
            )}
          </span>
        );
        const helpText = [field.description, kind === 'list' ? 'One item per line, or separated by commas.' : null].filter(Boolean).join(' ');
        const help = helpText ? (
          <span className="field-help" id={`${fieldId}-help`}>
            {helpText}
          </span>
        ) : null;
        const describedBy = helpText ? `${fieldId}-help` : undefined;
        if (kind === 'boolean') {
          return (
            <div className="field field-check" key={name}>
              <input id={fieldId} type="checkbox" checked={values[name] === true} onChange={(e) => set(name, e.target.checked)} aria-describedby={describedBy} />
              <label htmlFor={fieldId}>{label}</label>
              {help}
            </div>
          );
        }
        return (
          <div className="field" key={name}>
            <label htmlFor={fieldId}>{label}</label>
            {kind === 'enum' ? (
              <select id={fieldId} required={isRequired} value={String(values[name] ?? '')} onChange={(e) => set(name, e.target.value)} aria-describedby={describedBy}>
                <option value="">Choose…</option>
                {field.enum?.map((option) => (
                  <option key={String(option)} value={String(option)}>
                    {String(option)}
                  </option>
                ))}
              </select>
            ) : kind === 'text' || kind === 'list' ? (
              <textarea
                id={fieldId}
                rows={3}
                required={isRequired}
                minLength={kind === 'text' ? field.minLength : undefined}
                maxLength={kind === 'text' ? field.maxLength : undefined}
                value={String(values[name] ?? '')}
                onChange={(e) => set(name, e.target.value)}
                aria-describedby={describedBy}
              />
            ) : (
              <input
                id={fieldId}
                type={kind === 'number' || kind === 'integer' ? 'number' : (INPUT_TYPES[field.format ?? ''] ?? 'text')}
                step={kind === 'integer' ? 1 : kind === 'number' ? 'any' : undefined}
                min={field.minimum}
                max={field.maximum}
                minLength={field.minLength}
                maxLength={field.maxLength}
                pattern={field.pattern}
                required={isRequired}
                value={String(values[name] ?? '')}
                onChange={(e) => set(name, e.target.value)}
                aria-describedby={describedBy}
              />
            )}
            {help}
          </div>
        );
      })}
      {error ? (
        <div className="alert alert-error" role="alert">
          <p>{describeError(error)}</p>
        </div>
      ) : null}
      <button type="submit" className="button button-primary" disabled={busy}>
        {busy ? 'Sending…' : submitLabel}
      </button>
    </form>
  );
}
