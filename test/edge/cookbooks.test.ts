import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cookbooksDir, loadCookbooks, parseCookbook, readCookbookFiles } from '#db/cookbooks';
import { bearer, createTestAccount, createTestApp, expectError, expectOk } from '../helpers/app.js';

interface Summary {
  id: string;
  title: string;
  category: string;
  stepCount: number;
  humanSteps: number;
}

describe('cookbook files', () => {
  it('holds at least six checked procedures, each with slots and steps whose schemas compile', async () => {
    const cookbooks = await readCookbookFiles(cookbooksDir);
    expect(cookbooks.length).toBeGreaterThanOrEqual(6);
    for (const cookbook of cookbooks) {
      expect(
        cookbook.slots.some((slot) => slot.required),
        cookbook.id,
      ).toBe(true);
      expect(cookbook.steps.length, cookbook.id).toBeGreaterThanOrEqual(3);
      for (const step of cookbook.steps) {
        expect(step.timeLimits.expiresAfter, `${cookbook.id}/${step.stepId}`).toMatch(/^\d+[smhd]$/);
        if (step.kind === 'human') expect(step.timeLimits.reminderAfter, `${cookbook.id}/${step.stepId}`).toBeDefined();
      }
    }
    expect(cookbooks.filter((cookbook) => cookbook.steps.some((step) => step.kind === 'human')).length).toBeGreaterThanOrEqual(4);
  });

  const valid = {
    id: 'x-test',
    title: 'T',
    description: 'D',
    category: 'c',
    slots: [{ name: 'a', description: 'd', category: 'c', required: true }],
    steps: [{ stepId: 's1', title: 'S', kind: 'agent', instructions: 'Use {{slots.a.proxy}}', inputSchema: { type: 'object' } }],
  };

  it('rejects files with a broken schema, an unknown slot reference, a duplicate step or bad time limits', () => {
    expect(parseCookbook(valid, 'ok.json').steps[0]!.timeLimits).toEqual({ expiresAfter: '7d' });
    const broken = (change: (file: typeof valid) => void) => {
      const copy = structuredClone(valid);
      change(copy);
      return () => parseCookbook(copy, 'bad.json');
    };
    expect(broken((f) => (f.steps[0]!.inputSchema = { type: 'object', properties: { a: { type: 'strin' } } } as never))).toThrow(
      /inputSchema is not a valid JSON schema/,
    );
    expect(broken((f) => (f.steps[0]!.instructions = 'Call {{slots.nope.id}}'))).toThrow(/unknown slot "nope"/);
    expect(broken((f) => f.steps.push({ ...f.steps[0]! }))).toThrow(/declared twice/);
    expect(broken((f) => ((f.steps[0] as Record<string, unknown>).timeLimits = { reminderAfter: '2d', expiresAfter: '1d' }))).toThrow(/shorter/);
    expect(broken((f) => ((f.steps[0] as Record<string, unknown>).kind = 'robot'))).toThrow(/kind/);
  });

  it('gives every human step the context its person needs, drawn from fields the earlier steps declare', async () => {
    for (const cookbook of await readCookbookFiles(cookbooksDir)) {
      for (const [position, step] of cookbook.steps.entries()) {
        if (step.kind !== 'human') continue;
        const where = `${cookbook.id}/${step.stepId}`;
        expect(step.context?.length ?? 0, `${where} declares no context: the person would act on data they cannot see`).toBeGreaterThan(0);
        for (const entry of step.context ?? []) {
          const earlier = cookbook.steps.findIndex((candidate) => candidate.stepId === entry.from);
          expect(earlier, where).toBeGreaterThanOrEqual(0);
          expect(earlier, where).toBeLessThan(position);
        }
      }
    }
    // The declared-fields check: a context must name earlier steps and fields their schemas declare.
    const withHuman = (context: unknown) => ({
      ...structuredClone(valid),
      steps: [
        {
          stepId: 'draft',
          title: 'D',
          kind: 'agent',
          instructions: 'x',
          inputSchema: { type: 'object', properties: { message: { type: 'string' } } },
        },
        { stepId: 'approve', title: 'A', kind: 'human', instructions: 'Read the message', inputSchema: { type: 'object' }, context },
      ],
    });
    expect(parseCookbook(withHuman([{ from: 'draft', fields: ['message'] }]), 'ok.json').steps[1]!.context).toEqual([
      { from: 'draft', fields: ['message'] },
    ]);
    expect(() => parseCookbook(withHuman([{ from: 'draft', fields: ['recipients'] }]), 'bad.json')).toThrow(
      /context field "recipients" is not in step "draft"'s inputSchema/,
    );
    expect(() => parseCookbook(withHuman([{ from: 'approve' }]), 'bad.json')).toThrow(/not an earlier step/);
    expect(() => parseCookbook(withHuman([{ from: 'later' }]), 'bad.json')).toThrow(/not an earlier step/);
    const onAgent = withHuman(undefined);
    (onAgent.steps[0] as Record<string, unknown>).context = [{ from: 'draft' }];
    expect(() => parseCookbook(onAgent, 'bad.json')).toThrow(/only human steps show/);
  });

  it('refuses a human step whose result could say "not approved": declining is a decision, not false', () => {
    const withApproval = (approved: Record<string, unknown>, kind = 'human') => ({
      ...structuredClone(valid),
      steps: [
        { stepId: 'draft', title: 'D', kind: 'agent', instructions: 'x', inputSchema: { type: 'object' } },
        {
          stepId: 'approve',
          title: 'A',
          kind,
          instructions: 'Approve',
          inputSchema: { type: 'object', required: ['approved'], properties: { approved } },
          decisions: { reject: true },
        },
      ],
    });
    expect(() => parseCookbook(withApproval({ type: 'boolean' }), 'bad.json')).toThrow(
      /field "approved" must be \{"type": "boolean", "const": true\}/,
    );
    expect(() => parseCookbook(withApproval({ type: 'boolean', const: false }), 'bad.json')).toThrow(/const": true/);
    expect(parseCookbook(withApproval({ type: 'boolean', const: true }), 'ok.json').steps[1]!.inputSchema).toMatchObject({
      properties: { approved: { const: true } },
    });
    // An agent's yes/no report is data, not an approval.
    const agentReport = withApproval({ type: 'boolean' }, 'agent');
    delete (agentReport.steps[1] as Record<string, unknown>).decisions;
    expect(parseCookbook(agentReport, 'ok.json').steps).toHaveLength(2);
  });
});

describe('GET /api/v1/cookbooks and /cookbooks/{id}', () => {
  let app: FastifyInstance;

  beforeAll(async () => {
    app = await createTestApp();
    await loadCookbooks(app.deps.sql);
  });
  afterAll(async () => app.close());

  it('fits the directory: every slot names a category of the imported catalog and suggests API ids it holds', async () => {
    // The catalog the suite's global setup imported (test/helpers/directory-setup.ts), not operator rows.
    const categories = new Set(
      (await app.deps.sql<{ category: string }[]>`select distinct unnest(categories) as category from apis where source = 'apis.guru'`).map(
        (r) => r.category,
      ),
    );
    const ids = new Set((await app.deps.sql<{ id: string }[]>`select id from apis where source = 'apis.guru'`).map((r) => r.id));
    const missing: string[] = [];
    for (const cookbook of await readCookbookFiles(cookbooksDir)) {
      for (const slot of cookbook.slots) {
        if (!categories.has(slot.category)) missing.push(`${cookbook.id}/${slot.name}: category "${slot.category}"`);
        if (slot.suggestedProviders.length === 0) missing.push(`${cookbook.id}/${slot.name}: no suggestion`);
        for (const id of slot.suggestedProviders) if (!ids.has(id)) missing.push(`${cookbook.id}/${slot.name}: API "${id}"`);
      }
    }
    expect(missing, 'slots naming what the directory lacks').toEqual([]);
    // The detail answers the same ids.
    type SlotView = {
      name: string;
      category: string;
      suggestedProviders: string[];
      suggestions: { apiId: string; callability: { state: string } }[];
    };
    const { cookbook } = expectOk<{ cookbook: { slots: SlotView[] } }>(
      await app.inject({
        method: 'GET',
        url: '/api/v1/cookbooks/weather-alert-sms',
        headers: bearer((await createTestAccount(app.deps.sql, { balanceMicros: 1_000_000n })).fullKey),
      }),
    );
    // Suggestions come callable first for the caller (docs/decisions/callability-states.md), so only the sets are fixed here.
    const rank: Record<string, number> = { ready: 0, needs_key: 1, needs_oauth: 1, unavailable: 2 };
    for (const [name, category, ids] of [
      ['sms', 'messaging', ['twilio.com-api', 'nexmo.com-sms']],
      ['weather', 'location', ['weatherbit.io', 'visualcrossing.com-weather']],
    ] as const) {
      const slot = cookbook.slots.find((s) => s.name === name)!;
      expect(slot.category).toBe(category);
      expect([...slot.suggestedProviders].sort()).toEqual([...ids].sort());
      expect(slot.suggestions.map((s) => s.apiId)).toEqual(slot.suggestedProviders);
      const ranks = slot.suggestions.map((s) => rank[s.callability.state]!);
      expect(ranks).toEqual([...ranks].sort((a, b) => a - b));
    }
  });

  it('lists cookbooks publicly, with paging, free text and category filters', async () => {
    const all = expectOk<{ cookbooks: Summary[]; nextCursor: string | null }>(await app.inject({ method: 'GET', url: '/api/v1/cookbooks' }));
    expect(all.cookbooks.length).toBeGreaterThanOrEqual(6);
    expect(all.cookbooks.map((c) => c.id)).toContain('weather-alert-sms');
    expect(all.nextCursor).toBeNull();

    const first = expectOk<{ cookbooks: Summary[]; nextCursor: string }>(await app.inject({ method: 'GET', url: '/api/v1/cookbooks?limit=2' }));
    expect(first.cookbooks).toHaveLength(2);
    const second = expectOk<{ cookbooks: Summary[] }>(
      await app.inject({ method: 'GET', url: `/api/v1/cookbooks?limit=2&cursor=${first.nextCursor}` }),
    );
    expect(second.cookbooks[0]!.id > first.cookbooks[1]!.id).toBe(true);

    const sms = expectOk<{ cookbooks: Summary[] }>(await app.inject({ method: 'GET', url: '/api/v1/cookbooks?q=sms%20weather' }));
    expect(sms.cookbooks.map((c) => c.id)).toContain('weather-alert-sms');
    const translate = expectOk<{ cookbooks: Summary[] }>(await app.inject({ method: 'GET', url: '/api/v1/cookbooks?q=transl' }));
    expect(translate.cookbooks.map((c) => c.id)).toEqual(['translate-and-email']);
    const payments = expectOk<{ cookbooks: Summary[] }>(await app.inject({ method: 'GET', url: '/api/v1/cookbooks?category=Payments' }));
    expect(payments.cookbooks.length).toBeGreaterThanOrEqual(2);
    expect(payments.cookbooks.every((c) => c.category === 'payments')).toBe(true);
    const none = expectOk<{ cookbooks: Summary[] }>(await app.inject({ method: 'GET', url: '/api/v1/cookbooks?q=zzzqqqxxx' }));
    expect(none.cookbooks).toEqual([]);
    expectError(await app.inject({ method: 'GET', url: '/api/v1/cookbooks?limit=0' }), 400, 'validation_failed');
  });

  it('answers details for $0.005 with the cost headers, and 404 for an unknown cookbook without charging', async () => {
    const account = await createTestAccount(app.deps.sql, { balanceMicros: 1_000_000n });
    const res = await app.inject({ method: 'GET', url: '/api/v1/cookbooks/weather-alert-sms', headers: bearer(account.fullKey) });
    const body = expectOk<{
      cookbook: { id: string; slots: { name: string; required: boolean }[]; steps: { stepId: string; kind: string; inputSchema: object }[] };
    }>(res);
    expect(res.headers['x-service-cost']).toBe('0.005');
    expect(res.headers['x-service-balance']).toBe('0.995');
    expect(body.cookbook.slots.find((s) => s.name === 'sms')?.required).toBe(true);
    expect(body.cookbook.steps.map((s) => s.kind)).toEqual(['agent', 'agent', 'human', 'agent']);
    expect(body.cookbook.steps[2]!.inputSchema).toMatchObject({ type: 'object', required: ['approved'] });

    expectError(await app.inject({ method: 'GET', url: '/api/v1/cookbooks/no-such-cookbook', headers: bearer(account.fullKey) }), 404, 'not_found');
    const [row] = await app.deps.sql<{ balance_micros: bigint }[]>`select balance_micros from accounts where id = ${account.accountId}`;
    expect(row!.balance_micros).toBe(995_000n);
  });

  it('requires a key for details and answers 402 when the balance is below the price', async () => {
    expectError(await app.inject({ method: 'GET', url: '/api/v1/cookbooks/weather-alert-sms' }), 401, 'missing_credentials');
    const poor = await createTestAccount(app.deps.sql);
    const body = expectError(
      await app.inject({ method: 'GET', url: '/api/v1/cookbooks/weather-alert-sms', headers: bearer(poor.fullKey) }),
      402,
      'insufficient_balance',
    );
    expect(body).toMatchObject({ balance: 0, cost: 0.005 });
  });
});
