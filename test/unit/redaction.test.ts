import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { MIN_LEAK, SecretRedactor, secretForms } from '#core/gateway';

// The redactor's guarantee, tested as a property: no run of MIN_LEAK or more consecutive characters
// of any form of a secret survives, wherever the answer is cut and however it is chunked.
// FUZZ_RUNS raises the number of cases (scripts/fuzz.sh runs a long session); npm test runs a bounded one.
const RUNS = Number(process.env.FUZZ_RUNS ?? 300);
/** A long run (test:fuzz) gets the time it needs. */
const TIMEOUT = 30_000 + RUNS * 20;

/** Keys as upstreams issue them: mostly URL-safe, sometimes with characters that encode. */
const keyAlphabet = fc.constantFrom(...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~+/=:% &?#'.split(''));
const key = fc.string({ unit: keyAlphabet, minLength: MIN_LEAK, maxLength: 64 });
/** Filler an upstream writes around an echo: text and bytes the key's forms may also contain. */
const filler = fc.string({ unit: fc.constantFrom(...'abcdefghijklmnopqrstuvwxyz ABC0123<>"{}:,=&?/\n'.split('')), maxLength: 200 });

function leaks(output: Buffer, secret: string): string | null {
  const text = output.toString('latin1');
  for (const form of secretForms(secret)) {
    const f = form.toString('latin1');
    for (let i = 0; i + MIN_LEAK <= f.length; i += 1) {
      const piece = f.slice(i, i + MIN_LEAK);
      if (text.includes(piece)) return piece;
    }
    if (f.length < MIN_LEAK && text.includes(f)) return f;
  }
  return null;
}

/** A body quoting random pieces (possibly cut mid-form) of random forms of the key, between filler. */
const echoBody = (secret: string) =>
  fc
    .array(
      fc.tuple(filler, fc.nat({ max: 100 }), fc.nat({ max: 100 }), fc.nat({ max: 100 })).map(([text, formPick, from, length]) => {
        const forms = secretForms(secret);
        const form = forms[formPick % forms.length]!.toString('latin1');
        const start = from % form.length;
        return text + form.slice(start, start + Math.max(MIN_LEAK, length % (form.length + 1)));
      }),
      { minLength: 1, maxLength: 8 },
    )
    .map((parts) => Buffer.from(parts.join(''), 'latin1'));

async function throughStream(redactor: SecretRedactor, body: Buffer, cuts: number[]): Promise<Buffer> {
  const stream = redactor.stream();
  const out: Buffer[] = [];
  stream.on('data', (chunk: Buffer) => out.push(chunk));
  const done = new Promise<void>((resolve, reject) => {
    stream.on('end', resolve);
    stream.on('error', reject);
  });
  let from = 0;
  for (const cut of [...new Set(cuts.map((c) => c % (body.length + 1)))].sort((a, b) => a - b)) {
    stream.write(body.subarray(from, cut));
    from = cut;
  }
  stream.end(body.subarray(from));
  await done;
  return Buffer.concat(out);
}

describe('SecretRedactor (property-based)', () => {
  it('leaves no run of MIN_LEAK characters of any form of the key in a body, whole or cut anywhere', { timeout: TIMEOUT }, () => {
    fc.assert(
      fc.property(
        key.chain((secret) => fc.tuple(fc.constant(secret), echoBody(secret), fc.nat())),
        ([secret, body, cutAt]) => {
          const redactor = new SecretRedactor([secret]);
          const whole = redactor.redact(body);
          expect(leaks(whole, secret)).toBeNull();
          // An excerpt: cut after redacting, anywhere.
          expect(leaks(whole.subarray(0, cutAt % (whole.length + 1)), secret)).toBeNull();
          // Text (headers, Location) too.
          expect(leaks(Buffer.from(redactor.redactText(body.toString('latin1')), 'utf8'), secret)).toBeNull();
        },
      ),
      { numRuns: RUNS },
    );
  });

  it('streams to the same output as the whole body, however it is chunked', { timeout: TIMEOUT }, async () => {
    await fc.assert(
      fc.asyncProperty(
        key.chain((secret) => fc.tuple(fc.constant(secret), echoBody(secret), fc.array(fc.nat(), { maxLength: 12 }))),
        async ([secret, body, cuts]) => {
          const redactor = new SecretRedactor([secret]);
          const streamed = await throughStream(redactor, body, cuts);
          expect(leaks(streamed, secret)).toBeNull();
          expect(streamed.equals(redactor.redact(body))).toBe(true);
        },
      ),
      { numRuns: RUNS },
    );
  });

  it('changes nothing in a body that shares no run of MIN_LEAK characters with the key', { timeout: TIMEOUT }, () => {
    fc.assert(
      fc.property(key, filler, (secret, text) => {
        const body = Buffer.from(text);
        fc.pre(leaks(body, secret) === null);
        expect(new SecretRedactor([secret]).redact(body).equals(body)).toBe(true);
      }),
      { numRuns: RUNS },
    );
  });

  it('covers several secrets at once (platform keys and tokens)', { timeout: TIMEOUT }, () => {
    fc.assert(
      fc.property(key, key, filler, (a, b, text) => {
        const body = Buffer.from(`${text}${a.slice(1)}${text}${b.slice(0, -1)}`);
        const out = new SecretRedactor([a, b]).redact(body);
        expect(leaks(out, a)).toBeNull();
        expect(leaks(out, b)).toBeNull();
      }),
      { numRuns: RUNS },
    );
  });
});

describe('SecretRedactor (examples)', () => {
  const secret = 'pk_live_9f8e7d6c5b4a39281706f5e4d3c2b1a0xyzw';
  const redactor = new SecretRedactor([secret]);

  it('catches a truncated echo of a request line (38 of 40 characters)', { timeout: TIMEOUT }, () => {
    const echo = `400 Bad Request: GET /v1/${'a'.repeat(30)}?key=${secret.slice(0, 38)}`;
    expect(redactor.redactText(echo)).toBe(`400 Bad Request: GET /v1/${'a'.repeat(30)}?key=[redacted]`);
  });

  it('catches basic-auth base64 and its pieces', { timeout: TIMEOUT }, () => {
    const basic = Buffer.from(`${secret}:`).toString('base64');
    expect(redactor.redactText(`Authorization: Basic ${basic}`)).toBe('Authorization: Basic [redacted]');
    expect(redactor.redactText(`seen ${basic.slice(5, 20)}`)).toBe('seen [redacted]');
  });

  it('keeps a short run (under MIN_LEAK characters) as it is', { timeout: TIMEOUT }, () => {
    expect(redactor.redactText(`id ${secret.slice(3, 3 + MIN_LEAK - 1)} ok`)).toBe(`id ${secret.slice(3, 3 + MIN_LEAK - 1)} ok`);
  });

  it('matches a secret shorter than MIN_LEAK whole', { timeout: TIMEOUT }, () => {
    expect(new SecretRedactor(['abc12']).redactText('x abc12 y abc1')).toBe('x [redacted] y abc1');
  });
});
