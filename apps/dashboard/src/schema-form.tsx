import { useId, useState, type FormEvent, type ReactNode } from 'react';
import { describeError } from './api';
import { useAction } from './ui';

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
  items?: FieldSchema & ObjectSchema;
}

export interface ObjectSchema {
  type?: string | string[];
  properties?: Record<string, FieldSchema>;
  required?: string[];
}

type FieldKind = 'string' | 'number' | 'integer' | 'boolean' | 'enum' | 'text' | 'list' | 'rows';
type Scalar = string | boolean;
type Row = Record<string, Scalar>;
type Value = Scalar | Row[];

const typeOf = (field: FieldSchema) => (Array.isArray(field.type) ? field.type.find((t) => t !== 'null') : field.type);

function kindOf(field: FieldSchema): FieldKind {
  if (Array.isArray(field.enum) && field.enum.length > 0) return 'enum';
  const type = typeOf(field);
  if (type === 'number' || type === 'integer' || type === 'boolean') return type;
  if (type === 'array') return field.items && typeOf(field.items) === 'object' && field.items.properties ? 'rows' : 'list';
  if (type === 'string' && (field.maxLength === undefined || field.maxLength > 200) && field.format === undefined && field.pattern === undefined)
    return 'text';
  return 'string';
}

const labelFor = (name: string, field: FieldSchema) =>
  field.title ??
  name
    .replace(/([a-z])([A-Z])/g, '$1 $2')
    .replaceAll('_', ' ')
    .replace(/^./, (c) => c.toUpperCase());

const INPUT_TYPES: Record<string, string> = { email: 'email', uri: 'url', url: 'url', date: 'date', 'date-time': 'datetime-local' };

/** Required fields first (stored schemas do not keep their authors' key order), then the rest. */
function orderedFields(schema: ObjectSchema): [string, FieldSchema][] {
  const required = new Set(schema.required ?? []);
  return Object.entries(schema.properties ?? {}).sort(([a], [b]) => Number(required.has(b)) - Number(required.has(a)));
}

function initialValue(field: FieldSchema, required: boolean): Value {
  const kind = kindOf(field);
  if (kind === 'boolean') return field.default === true;
  if (kind === 'rows') return required ? [emptyRow(field.items ?? {})] : [];
  return field.default === undefined || typeof field.default === 'object' ? '' : String(field.default);
}

function emptyRow(schema: ObjectSchema): Row {
  const required = new Set(schema.required ?? []);
  return Object.fromEntries(orderedFields(schema).map(([name, field]) => [name, initialValue(field, required.has(name)) as Scalar]));
}

/** Turns the form's values into the JSON the schema asks for; empty optional fields are left out. */
export function toResultData(schema: ObjectSchema, values: Record<string, Value>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, field] of Object.entries(schema.properties ?? {})) {
    const value = values[name];
    const kind = kindOf(field);
    if (kind === 'boolean') {
      out[name] = value === true;
      continue;
    }
    if (kind === 'rows') {
      if (Array.isArray(value)) out[name] = value.map((row) => toResultData(field.items ?? {}, row));
      continue;
    }
    if (typeof value !== 'string' || value === '') continue;
    if (kind === 'number' || kind === 'integer') out[name] = Number(value);
    else if (kind === 'list') {
      const itemType = field.items ? typeOf(field.items) : undefined;
      const items = value
        .split(/[\n,]/)
        .map((item) => item.trim())
        .filter(Boolean);
      out[name] = itemType === 'number' || itemType === 'integer' ? items.map(Number) : items;
    } else if (kind === 'enum') out[name] = field.enum?.find((option) => String(option) === value) ?? value;
    else if (field.format === 'date-time') out[name] = new Date(value).toISOString();
    else out[name] = value;
  }
  return out;
}

function FieldLabel({ name, field, required }: { name: string; field: FieldSchema; required: boolean }) {
  return (
    <span className="field-label">
      {labelFor(name, field)}
      {required ? (
        <span className="required" aria-hidden="true">
          {' '}
          *
        </span>
      ) : (
        <span className="optional"> (optional)</span>
      )}
    </span>
  );
}

/** One scalar field (string, text, number, integer, boolean, enum, list of values). */
function ScalarField({
  id,
  name,
  field,
  required,
  value,
  onChange,
}: {
  id: string;
  name: string;
  field: FieldSchema;
  required: boolean;
  value: Scalar;
  onChange: (value: Scalar) => void;
}) {
  const kind = kindOf(field);
  const helpText = [field.description, kind === 'list' ? 'One item per line, or separated by commas.' : null].filter(Boolean).join(' ');
  const help: ReactNode = helpText ? (
    <span className="field-help" id={`${id}-help`}>
      {helpText}
    </span>
  ) : null;
  const describedBy = helpText ? `${id}-help` : undefined;
  if (kind === 'boolean') {
    return (
      <div className="field field-check">
        <input id={id} type="checkbox" checked={value === true} onChange={(e) => onChange(e.target.checked)} aria-describedby={describedBy} />
        <label htmlFor={id}>
          <FieldLabel name={name} field={field} required={required} />
        </label>
        {help}
      </div>
    );
  }
  const text = String(value);
  return (
    <div className="field">
      <label htmlFor={id}>
        <FieldLabel name={name} field={field} required={required} />
      </label>
      {kind === 'enum' ? (
        <select id={id} required={required} value={text} onChange={(e) => onChange(e.target.value)} aria-describedby={describedBy}>
          <option value="">Choose…</option>
          {field.enum?.map((option) => (
            <option key={String(option)} value={String(option)}>
              {String(option)}
            </option>
          ))}
        </select>
      ) : kind === 'text' || kind === 'list' ? (
        <textarea
          id={id}
          rows={3}
          required={required}
          minLength={kind === 'text' ? field.minLength : undefined}
          maxLength={kind === 'text' ? field.maxLength : undefined}
          value={text}
          onChange={(e) => onChange(e.target.value)}
          aria-describedby={describedBy}
        />
      ) : (
        <input
          id={id}
          type={kind === 'number' || kind === 'integer' ? 'number' : (INPUT_TYPES[field.format ?? ''] ?? 'text')}
          step={kind === 'integer' ? 1 : kind === 'number' ? 'any' : undefined}
          min={field.minimum}
          max={field.maximum}
          minLength={field.minLength}
          maxLength={field.maxLength}
          pattern={field.pattern}
          required={required}
          value={text}
          onChange={(e) => onChange(e.target.value)}
          aria-describedby={describedBy}
        />
      )}
      {help}
    </div>
  );
}

/** A list of objects (e.g. one decision per invoice): a group of fields per row, rows added and removed. */
function RowsField({
  id,
  name,
  field,
  required,
  rows,
  onChange,
}: {
  id: string;
  name: string;
  field: FieldSchema;
  required: boolean;
  rows: Row[];
  onChange: (rows: Row[]) => void;
}) {
  const items: ObjectSchema = field.items ?? {};
  const itemRequired = new Set(items.required ?? []);
  const label = labelFor(name, field);
  return (
    <fieldset className="field rows">
      <legend>
        <FieldLabel name={name} field={field} required={required} />
      </legend>
      {field.description && <p className="field-help">{field.description}</p>}
      {rows.map((row, index) => (
        <div className="row-group" key={index} role="group" aria-label={`${label} ${index + 1}`}>
          {orderedFields(items).map(([sub, subField]) => (
            <ScalarField
              key={sub}
              id={`${id}-${index}-${sub}`}
              name={sub}
              field={subField}
              required={itemRequired.has(sub)}
              value={row[sub] ?? ''}
              onChange={(value) => onChange(rows.map((r, i) => (i === index ? { ...r, [sub]: value } : r)))}
            />
          ))}
          <button
            type="button"
            className="button button-small"
            onClick={() => onChange(rows.filter((_, i) => i !== index))}
            aria-label={`Remove ${label} ${index + 1}`}
          >
            Remove
          </button>
        </div>
      ))}
      <button type="button" className="button button-small" onClick={() => onChange([...rows, emptyRow(items)])} aria-label={`Add to ${label}`}>
        {rows.length === 0 ? 'Add a row' : 'Add another row'}
      </button>
    </fieldset>
  );
}

/**
 * A form generated from a human step's inputSchema: strings (single or multi-line, with format
 * hints), numbers, integers, booleans, enums, lists of values and lists of objects, with required
 * fields marked and checked by the browser. The server validates again and its error is shown as a
 * sentence.
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
  const fields = orderedFields(schema);
  const [values, setValues] = useState<Record<string, Value>>(() =>
    Object.fromEntries(fields.map(([name, field]) => [name, initialValue(field, required.has(name))])),
  );
  const { busy, error, run } = useAction();
  const set = (name: string, value: Value) => setValues((previous) => ({ ...previous, [name]: value }));

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    await run(async () => {
      await onSubmit(toResultData(schema, values));
    });
  };

  return (
    <form className="schema-form" onSubmit={submit}>
      {fields.length === 0 && <p className="muted">This step needs no input: confirm when it is done.</p>}
      {fields.map(([name, field]) => {
        const value = values[name];
        return kindOf(field) === 'rows' ? (
          <RowsField
            key={name}
            id={`${id}-${name}`}
            name={name}
            field={field}
            required={required.has(name)}
            rows={Array.isArray(value) ? value : []}
            onChange={(rows) => set(name, rows)}
          />
        ) : (
          <ScalarField
            key={name}
            id={`${id}-${name}`}
            name={name}
            field={field}
            required={required.has(name)}
            value={Array.isArray(value) || value === undefined ? '' : value}
            onChange={(next) => set(name, next)}
          />
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
