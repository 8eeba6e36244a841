import { describe, expect, it } from 'vitest';
import { AccessSnapshot, callabilityOf, callerAccessOf, NO_ACCESS, type ApiAccess } from '#core/directory';

// The state rules of docs/decisions/callability-states.md, first match wins, as a pure function.

const api = (over: Partial<ApiAccess>): ApiAccess => ({
  id: 'some.api',
  authType: 'apiKey',
  platformKey: false,
  provider: null,
  flows: null,
  keyDocsUrl: null,
  ...over,
});
const oauth = (over: Partial<ApiAccess> = {}) => api({ authType: 'oauth2', provider: 'accounts.idp.dev', flows: ['authorizationCode'], ...over });
const none = new Set<string>();
const operator = new Set(['accounts.idp.dev']);
const holding = (rows: { kind: string; name: string; status?: string }[], allowed: string[] | null = null) =>
  callerAccessOf(
    rows.map((r) => ({ kind: r.kind, name: r.name, status: r.status ?? null, is_default: null })),
    allowed,
  );

describe('callabilityOf', () => {
  it('is ready with no auth, a platform key or the caller own key', () => {
    expect(callabilityOf(api({ authType: 'none' }), none)).toEqual({ state: 'ready', reason: 'no_auth' });
    expect(callabilityOf(api({ platformKey: true }), none)).toEqual({ state: 'ready', reason: 'platform_key' });
    expect(callabilityOf(api({ platformKey: true }), none, holding([{ kind: 'key', name: 'some.api' }]))).toEqual({
      state: 'ready',
      reason: 'own_key',
    });
    expect(callabilityOf(oauth({ flows: null, provider: null }), none, holding([{ kind: 'key', name: 'some.api' }])).state).toBe('ready');
  });

  it('needs a key for apiKey, bearer and basic, with where to get one', () => {
    for (const authType of ['apiKey', 'bearer', 'basic']) {
      const state = callabilityOf(api({ authType, keyDocsUrl: 'https://docs.example.org/keys' }), none);
      expect(state).toMatchObject({ state: 'needs_key', reason: 'key_required', keyDocsUrl: 'https://docs.example.org/keys' });
      expect(state.hint).toContain('POST /api/v1/connect/some.api');
    }
    expect(callabilityOf(api({}), none).keyDocsUrl).toBeUndefined();
  });

  it('is unavailable for a scheme the gateway cannot carry, naming it', () => {
    const state = callabilityOf(api({ authType: 'mutualTLS', platformKey: true }), none, holding([{ kind: 'key', name: 'some.api' }]));
    expect(state).toMatchObject({ state: 'unavailable', reason: 'unsupported_scheme' });
    expect(state.hint).toContain('mutualTLS');
  });

  it('walks the OAuth 2 rules: described, usable flow, an app, a connection', () => {
    expect(callabilityOf(oauth({ flows: null }), operator).reason).toBe('oauth_not_described');
    // Flows kept, no provider: the importer found a placeholder authorization server.
    expect(callabilityOf(oauth({ provider: null }), operator)).toEqual({
      state: 'unavailable',
      reason: 'placeholder_provider',
      hint: expect.any(String),
    });
    expect(callabilityOf(oauth({ flows: ['password'] }), operator)).toMatchObject({ state: 'unavailable', reason: 'oauth_flow_unsupported' });
    for (const flow of ['authorizationCode', 'implicit', 'clientCredentials']) {
      expect(callabilityOf(oauth({ flows: [flow] }), operator)).toMatchObject({
        state: 'needs_oauth',
        reason: 'oauth_app',
        provider: 'accounts.idp.dev',
      });
    }
    expect(callabilityOf(oauth(), none)).toMatchObject({ state: 'unavailable', reason: 'no_oauth_app' });
    // An operator's own API may name a loopback or test host: an app registered for it is enough.
    expect(callabilityOf(oauth({ provider: '127.0.0.1:4000' }), new Set(['127.0.0.1:4000'])).state).toBe('needs_oauth');
    const own = holding([{ kind: 'app', name: 'accounts.idp.dev' }]);
    expect(callabilityOf(oauth(), none, own)).toMatchObject({ state: 'needs_oauth', reason: 'own_oauth_app' });
    const connected = holding([{ kind: 'oauth', name: 'accounts.idp.dev', status: 'ready' }]);
    expect(callabilityOf(oauth(), operator, connected)).toMatchObject({ state: 'ready', reason: 'oauth_connection' });
    const reauth = holding([{ kind: 'oauth', name: 'accounts.idp.dev', status: 'needs_reauth' }]);
    expect(callabilityOf(oauth(), operator, reauth)).toMatchObject({ state: 'needs_oauth', reason: 'reauth_required' });
    // One ready connection of several is enough.
    const mixed = holding([
      { kind: 'oauth', name: 'accounts.idp.dev', status: 'needs_reauth' },
      { kind: 'oauth', name: 'accounts.idp.dev', status: 'ready' },
    ]);
    expect(callabilityOf(oauth(), operator, mixed).state).toBe('ready');
  });

  it("leaves out what an agent key's allow-list does not name", () => {
    const narrow = holding([], ['other.api']);
    expect(callabilityOf(api({ authType: 'none' }), none, narrow)).toMatchObject({ state: 'unavailable', reason: 'key_not_allowed' });
    expect(callabilityOf(api({ authType: 'none', id: 'other.api' }), none, narrow).state).toBe('ready');
  });
});

describe('caller holdings and snapshots', () => {
  it('gives a caller holding nothing the anonymous fingerprint, and equal holdings equal ones', () => {
    expect(holding([]).fingerprint).toBe('');
    expect(NO_ACCESS.fingerprint).toBe('');
    const a = holding([
      { kind: 'key', name: 'x' },
      { kind: 'app', name: 'p' },
    ]);
    const b = holding([
      { kind: 'app', name: 'p' },
      { kind: 'key', name: 'x' },
    ]);
    expect(a.fingerprint).not.toBe('');
    expect(a.fingerprint).toBe(b.fingerprint);
    expect(holding([], []).fingerprint).not.toBe('');
  });

  it('lists the ready ids per caller and changes its version with the facts', () => {
    const apis = [api({ id: 'a', authType: 'none' }), api({ id: 'b' }), oauth({ id: 'c' })];
    const snapshot = new AccessSnapshot(apis, none);
    expect(snapshot.readyIds()).toEqual(['a']);
    expect(snapshot.readyIds(holding([{ kind: 'key', name: 'b' }]))).toEqual(['a', 'b']);
    expect(snapshot.json('c')).toBe(JSON.stringify(snapshot.of('c')));
    expect(snapshot.of('nope')).toBeNull();
    const withApp = snapshot.withOperatorProviders(operator);
    expect(withApp.version).not.toBe(snapshot.version);
    expect(withApp.of('c')?.state).toBe('needs_oauth');
    expect(new AccessSnapshot(apis, none).version).toBe(snapshot.version);
  });
});
