import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { updateApi } from '#db/metered-apis';
import { DEFAULT_MODEL_DIR, embedCatalog, evaluateDiscovery, loadDevset, loadEmbedder } from '#core/directory';
import { createTestApp, expectError, expectOk } from '../helpers/app.js';

interface Discovery {
  query: string;
  results: {
    api: { id: string; name: string; pricePerCall: number; description: string };
    score: number;
    reason: string;
    matched: { endpoints: { method: string; path: string; summary: string }[]; sentence: string | null };
    operations: { method: string; path: string; summary: string; price: number }[];
  }[];
  hint?: string;
}

let app: FastifyInstance;
beforeAll(async () => {
  app = await createTestApp();
});
afterAll(async () => {
  await app.close();
});

const discover = (query: string) => app.inject({ method: 'GET', url: `/api/v1/discover?${query}` });

describe('GET /api/v1/discover', () => {
  // The first request waits for the app's index (catalog, WordNet, the model, the capability vectors): seconds on a busy host.
  it('answers the APIs that can do a task, best first, with scores and endpoint reasons', async () => {
    const body = expectOk<Discovery>(await discover('q=send%20a%20text%20message%20to%20a%20phone'));
    expect(body.query).toBe('send a text message to a phone');
    expect(body.results.length).toBeGreaterThan(0);
    const scores = body.results.map((r) => r.score);
    expect([...scores].sort((a, b) => b - a)).toEqual(scores);
    expect(body.results.some((r) => /endpoints: (GET|POST) \//.test(r.reason))).toBe(true);
    // What matched, for a person: the endpoints named in the reason, and a sentence of the description.
    for (const r of body.results) {
      for (const e of r.matched.endpoints) expect(r.reason).toContain(`${e.method} ${e.path}`);
      if (r.matched.sentence !== null) expect(r.api.description).toContain(r.matched.sentence.replace(/…$/, ''));
    }
    expect(body.results.some((r) => r.matched.endpoints.length > 0)).toBe(true);
    expect(body.results.some((r) => r.matched.sentence !== null && /text|message|sms|phone/i.test(r.matched.sentence))).toBe(true);
    const alias = expectOk<Discovery>(await discover('query=turn%20an%20address%20into%20coordinates'));
    expect(alias.results.slice(0, 5).map((r) => r.api.id)).toEqual(
      expect.arrayContaining([expect.stringMatching(/geocod|opencage|graphhopper|gisgraphy/)]),
    );
  }, 60_000);

  it('names the operations that do the task, each with the price that applies to its path', async () => {
    const calendar = 'googleapis.com-calendar';
    const q = `/api/v1/discover?q=${encodeURIComponent('free busy information for a set of calendars')}&limit=5`;
    const before = expectOk<Discovery>(await discover(q.slice('/api/v1/discover?'.length)));
    for (const r of before.results) {
      expect(r.operations.length, JSON.stringify(r)).toBeLessThanOrEqual(3);
      // Without pricing rules every operation costs what the API costs.
      for (const o of r.operations) expect(o.price, JSON.stringify(r)).toBe(r.api.pricePerCall);
    }
    const hit = before.results.find((r) => r.api.id === calendar);
    expect(hit?.operations[0], JSON.stringify(before.results.map((r) => [r.api.id, r.operations]))).toMatchObject({
      method: 'POST',
      path: '/freeBusy',
      summary: expect.stringMatching(/free\/busy/) as unknown,
    });

    // A task in none of the operation's words: the capability that applies (free/busy, named by the need
    // "nothing booked") names it, and the answer says how the task was read.
    const goal = expectOk<Discovery & { interpreted: { capabilities: string[] } }>(
      await discover(`q=${encodeURIComponent('find an hour next week when the whole team has nothing booked')}&limit=5`),
    );
    expect(goal.interpreted.capabilities).toContain('free-busy');
    expect(
      goal.results.find((r) => r.api.id === calendar)?.operations[0],
      JSON.stringify(goal.results.map((r) => [r.api.id, r.operations])),
    ).toMatchObject({ method: 'POST', path: '/freeBusy' });

    // A pricing rule for that path prices that operation (and only it) once the index reloads.
    await updateApi(app.deps.sql, calendar, { pricingRules: [{ method: 'POST', path: '/freebusy', priceMicros: 2500n }] });
    const fresh = await createTestApp({ DIRECTORY_CACHE_SECONDS: '0' });
    try {
      await vi.waitFor(
        async () => {
          const body = expectOk<Discovery>(await fresh.inject({ method: 'GET', url: q }));
          const priced = body.results.find((r) => r.api.id === calendar)!;
          expect(priced.operations.find((o) => o.path === '/freeBusy')?.price).toBe(0.0025);
          for (const o of priced.operations.filter((o) => o.path !== '/freeBusy')) expect(o.price).toBe(priced.api.pricePerCall);
        },
        // A new app loads its index (and the model) first: seconds on a busy host.
        { timeout: 60_000, interval: 250 },
      );
    } finally {
      await updateApi(app.deps.sql, calendar, { pricingRules: [] });
      await fresh.close();
    }
  }, 120_000);

  it('answers clear errors for empty, punctuation-only and very long queries', async () => {
    expectError(await discover(''), 400, 'validation_failed');
    expectError(await discover('q='), 400, 'validation_failed');
    expectError(await discover('q=%3F%3F%21%20...'), 400, 'validation_failed');
    const long = expectError(await discover(`q=${'weather '.repeat(80)}`), 400, 'validation_failed');
    expect(long.error).toMatch(/too long/);
  });

  it('answers an empty list with a hint for words nothing knows', async () => {
    const body = expectOk<Discovery>(await discover('q=qzxqvjw%20vvbnqq'));
    expect(body.results).toEqual([]);
    expect(body.hint).toMatch(/other words/);
  });

  it('answers a task in plain English that no API words by its kind of service (the closest capability), and made-up words still by nothing', async () => {
    // No word of it is in the catalog ("dinner", "chicken", "rice"); the recipes capability is 0.31 from it.
    const plain = expectOk<Discovery>(await discover(`q=${encodeURIComponent('a dinner I can make with chicken and rice')}`));
    expect(plain.results[0]?.api.id).toBe('spoonacular.com');
    // Made-up words come as close to a capability (0.38 to QR codes) but are no English words.
    expect(expectOk<Discovery>(await discover('q=blorft%20wumble%20zink')).results).toEqual([]);
  });

  it('corrects misspelt words of a task, not the English words the catalog lacks', async () => {
    const corrections = async (task: string) =>
      expectOk<{ interpreted: { corrections: Record<string, string> } }>(await discover(`q=${encodeURIComponent(task)}`)).interpreted.corrections;
    // No API says "bottle" or "scam": they were read as "bottlenecks" and "sca". Their WordNet relatives say what they mean.
    await expect(corrections('how good is this bottle of wine')).resolves.toEqual({});
    await expect(corrections('is this link in a text message a scam')).resolves.toEqual({});
    // Another form of the same word is still taken ("kids": the catalog says "kid"), and so is a misspelling.
    await expect(corrections('keep the kids indoors')).resolves.toEqual({ kids: 'kid' });
    await expect(corrections('send an sms with twillio')).resolves.toEqual({ twillio: 'twilio' });
    // Of the catalog's words alike in letters, the fewest edits away: "recipient" shares more trigrams with "recipies".
    await expect(corrections('recipies w chicken thighs rice')).resolves.toMatchObject({ recipies: 'recipes' });
  });

  it("says a result matched forms of the task's words when the words it matched are not in the part it shows", async () => {
    // Docker Engine's description says "means" past the start the index keeps; its name resembles nothing here.
    const body = expectOk<Discovery>(await discover(`q=${encodeURIComponent('explain what petrichor means')}`));
    expect(body.results.find((r) => r.api.id === 'docker.com-engine')?.reason).toBe(
      "matches forms of the task's words in its description or operations",
    );
  });

  it('ranks first the APIs that are of the kind the task asks for in meaning, unless an API holds every word of the task', async () => {
    const first = async (task: string) => {
      const body = expectOk<Discovery & { interpreted: { capabilities: string[] } }>(await discover(`q=${encodeURIComponent(task)}`));
      return { id: body.results[0]?.api.id, reason: body.results[0]?.reason, capabilities: body.interpreted.capabilities };
    };
    // Read as text to speech; without the kin a podcast directory came first (its words: "podcast", "audio"),
    // and Google's Text-to-Speech, a member of the capability by its words, third.
    const speech = await first('turn my podcast script into audio');
    expect(speech.capabilities).toContain('text-to-speech');
    expect(['googleapis.com-texttospeech', 'amazonaws.com-polly', 'elevenlabs.io']).toContain(speech.id);
    expect(speech.reason).toMatch(/ranked for the kind of service the task reads as: text to speech/);
    // Driving directions state the need for routing; the routers its providers describe in other words ("calculates
    // a route", "route planning") are its members too, and come before a transit timetable that also names routes.
    const route = await first('driving directions from Porto to Seville');
    expect(['tomtom.com-routing', 'graphhopper.com', 'gov.bc.ca-router']).toContain(route.id);
    // The kind the wording states is a kind the task was read as.
    expect(route.capabilities).toContain('routing');
    // A musician's name says the task is about their concerts (a named thing no word of the catalog knows)...
    const gig = await first('is Radiohead playing anywhere near Berlin this year');
    expect(gig.capabilities).toContain('live-events');
    expect(['ticketmaster.com-discovery', 'bandsintown.com', 'lotadata.com']).toContain(gig.id);
    // ...unless the task asks for something else about them: the kind it reads as comes first.
    const similar = await first('songs similar to Radiohead');
    expect(similar.capabilities[0]).toBe('music-recommendations');
    expect(['ticketmaster.com-discovery', 'bandsintown.com']).not.toContain(similar.id);
    // A need the wording states ("ring my ...") is the task's need: the kind closest in meaning (appointment
    // booking, from "appointment") is left out, and the call API comes first.
    const ring = await first("ring my patients to remind them of tomorrow's appointment");
    expect(ring.capabilities).toEqual(['voice-calls']);
    expect(['nexmo.com-voice', 'twilio.com-api', 'amazonaws.com-connect', 'amazonaws.com-chime-sdk-voice', 'plivo.com', 'telnyx.com']).toContain(
      ring.id,
    );
    // Vonage's Number Insight holds every word of this one: the words rank it, and the verification
    // services, closer to the one-time-codes capability it is read as, stay under it.
    expect((await first('validate a phone number')).id).toBe('nexmo.com-number-insight');
    // An identifier the task quotes implies the kind that looks it up: an IP address its location, a UK
    // registration plate the vehicle's record (no word of either task names the kind).
    const ip = await first('which country is 8.8.8.8 in? it keeps placing orders on my shop');
    expect(ip.capabilities).toContain('ip-geolocation');
    // Without the address the same task reads as fraud detection alone: the identifier is what names the kind.
    expect((await first('which country is this customer in? they keep placing orders on my shop')).capabilities).toEqual(['fraud-detection']);
    expect(['greip.io', 'ip2location.com-geolocation', 'abstractapi.com-geolocation', 'ip2location.io', 'iptwist.com']).toContain(ip.id);
    // Sending email is a kind only a stated need reads as: "send an email to ..." does, an email address does not.
    const welcome = await first('send an email to new users when they sign up');
    expect(welcome.capabilities).toEqual(['email-sending']);
    expect(['sendgrid.com', 'mandrillapp.com', 'postmarkapp.com-server']).toContain(welcome.id);
    expect((await first('is this email address real')).capabilities).not.toContain('email-sending');
    // Everyday kinds drawn from the catalog: taking card payments, a calendar's events.
    expect(['adyen.com-checkoutservice', 'adyen.com-checkoutservice-v71', 'stripe.com', 'pay1.de-link']).toContain(
      (await first('take card payments on my bakery website')).id,
    );
    expect((await first('add the team offsite to our shared calendar')).id).toBe('googleapis.com-calendar');
    // eBay's logistics API is a limited release, open only to developers eBay approves: an open shipping API comes
    // first, and eBay's, still listed, says why it is lower.
    const parcel = expectOk<Discovery>(await discover(`q=${encodeURIComponent('where is my parcel right now')}`)).results;
    const ebay = parcel.findIndex((r) => r.api.id === 'ebay.com-sell-logistics');
    expect(ebay).toBeGreaterThan(0);
    expect(parcel[ebay]!.reason).toMatch(/ranked lower: its description says it is open only to some developers/);
    expect(parcel[0]!.reason).not.toMatch(/ranked lower/);
    const plate = await first('is the car with plate BD51 SMR taxed');
    expect(plate.capabilities).toContain('vehicle-records');
    expect(['regcheck.org.uk', 'api.gov.uk-vehicle-enquiry']).toContain(plate.id);
  });

  // The floors of the everyday sets moved on 2026-11-30 (the capability's kin) were measured on an AMD EPYC host
  // with AVX-512; the tuning sets measured the same there as on the Xeon host with AVX-512 VNNI the day before.
  // Floors a little under the figures measured in docs/DISCOVERY.md, so a change that makes
  // discovery worse on any set fails the suite. The held-out sets are measured, never tuned on:
  // a floor there catches a regression, it is not a target. The int8 embedding gives slightly other
  // vectors on other CPUs, and the figures of the earlier fusion moved by up to two tasks between
  // hosts: each floor leaves about two tasks' room under `measured` (2026-11-28, the broader
  // capability layer of issue 35, on an AMD EPYC host without VNNI). The same code on an Intel Xeon
  // with AVX-512 VNNI measured everyday at 0.738 / 0.724 (two tasks fewer in the top five; every
  // other set within one task): that set's floor is two tasks under the lower host's figure. Floors
  // move up with the ranking, and down only when a host the suite runs on measures the same code lower.
  // The second to seventh sets' floors moved up on 2026-11-30 (the twelfth session, an Intel Xeon with
  // AVX-512), each about two tasks under what that host measured; every floor again in the fourteenth session, two
  // tasks under what an AMD EPYC host with AVX2 only measured (where the sets measured lower than on AVX-512 before it).
  // One floor moved down by a ranking change rather than a host, in the fifteenth session: the members' depth took one of
  // the tenth set's tasks out of its top five (pharmacies near Plaça de Catalunya, 4 -> 6) while 34 tasks elsewhere rose
  // (docs/DISCOVERY.md, "a fifteenth session"); its recall@5 floor is two tasks under what that host then measured.
  const floors = [
    {
      set: 'devset',
      measured:
        '1.000 / 0.947, 1.000 / 0.954 with the kin, 1.000 / 0.950 with books on 2026-11-30, 1.000 / 0.965 on an AVX2 host (fourteenth session)',
      recallAt5: 0.95,
      mrr: 0.92,
    },
    {
      set: 'everyday',
      measured:
        '0.786 / 0.749, 0.738 / 0.724 on VNNI, 0.762 / 0.720 with the kin, 0.762 / 0.704 with English words uncorrected, 0.762 / 0.716 with stated needs at 0.8, 2026-11-30, 0.810 / 0.746 on an AVX2 host (fourteenth session)',
      recallAt5: 0.74,
      mrr: 0.69,
    },
    {
      set: 'everyday-2',
      measured:
        '0.864 / 0.670 on 2026-11-29, 0.909 / 0.753 with the kin, 0.909 / 0.770 with stated needs first, 0.932 / 0.779 at 0.8, 2026-11-30, 0.955 / 0.830 on an AVX2 host (fourteenth session)',
      recallAt5: 0.91,
      mrr: 0.78,
    },
    {
      set: 'everyday-3',
      measured:
        '0.800 / 0.669 on 2026-11-29, 0.867 / 0.730 with the kin, 0.911 / 0.774 with stated needs first, 2026-11-30, 0.956 / 0.814 on an AVX2 host (fourteenth session)',
      recallAt5: 0.91,
      mrr: 0.76,
    },
    {
      set: 'everyday-4',
      measured:
        '0.788 / 0.646 on 2026-11-29, 0.848 / 0.752 with the kin, 0.909 / 0.765 with stated needs first, 0.909 / 0.798 at 0.8, 2026-11-30, 0.939 / 0.813 on an AVX2 host (fourteenth session)',
      recallAt5: 0.87,
      mrr: 0.75,
    },
    {
      set: 'everyday-5',
      measured:
        '0.698 / 0.531 as written, 0.767 / 0.585 with the kin, 0.791 / 0.608 with artists named, 0.814 / 0.644 with stated needs first, 0.814 / 0.651 at 0.8, 2026-11-30, 0.930 / 0.742 on an AVX2 host (fourteenth session)',
      recallAt5: 0.88,
      mrr: 0.69,
    },
    {
      set: 'everyday-6',
      measured:
        '0.700 / 0.625 as written (blind), 0.775 / 0.679 with need phrases, 0.800 / 0.701 with five more kinds, 0.825 / 0.728 with identifiers, 2026-11-30, 0.875 / 0.759 on an AVX2 host (fourteenth session)',
      recallAt5: 0.82,
      mrr: 0.7,
    },
    {
      set: 'everyday-7',
      measured:
        '0.775 / 0.652 as written (blind), 0.825 / 0.687 tuned on, 0.850 / 0.709 with email sending, 2026-11-30, 0.950 / 0.795 on an AVX2 host (fourteenth session)',
      recallAt5: 0.9,
      mrr: 0.74,
    },
    {
      set: 'everyday-8',
      measured:
        '0.600 / 0.518 as written (blind), 0.675 / 0.607 with five more kinds, 0.725 / 0.640 with identifiers and links to pay, 2026-11-30, 0.850 / 0.715 on an AVX2 host (fourteenth session)',
      recallAt5: 0.8,
      mrr: 0.66,
    },
    {
      set: 'everyday-9',
      measured: '0.680 / 0.594 as written (blind), 0.820 / 0.713 tuned on, 2026-11-30, 0.960 / 0.803 on an AVX2 host (fourteenth session)',
      recallAt5: 0.92,
      mrr: 0.76,
    },
    {
      set: 'everyday-10',
      measured:
        "0.660 / 0.570 with the code before it was written, 0.720 / 0.644 with the code after (blind), 2026-11-30, 0.960 / 0.776 tuned on, an AVX2 host (fourteenth session), 0.920 / 0.767 on an AVX-512 VNNI host and 0.900 / 0.765 with the members' depth (fifteenth session)",
      recallAt5: 0.86,
      mrr: 0.73,
    },
    {
      set: 'everyday-11',
      measured: "0.840 / 0.698 as written (blind, agents' wording), 0.960 / 0.806 tuned on, an AVX2 host (fourteenth session), 2026-11-30",
      recallAt5: 0.92,
      mrr: 0.76,
    },
    {
      set: 'everyday-12',
      measured:
        '0.660 / 0.489 as written (blind, drawn from the catalog) with the code before the fourteenth session, 0.680 / 0.493 after its first changes, 0.760 / 0.547 tuned on, 0.880 / 0.660 with ten long-tail kinds, 2026-11-30',
      recallAt5: 0.84,
      mrr: 0.62,
    },
    {
      set: 'everyday-13',
      measured:
        '0.840 / 0.708 with the code before the fourteenth session, 0.860 / 0.718 after it (blind, five personas), 0.920 / 0.777 tuned on, 2026-11-30',
      recallAt5: 0.88,
      mrr: 0.73,
    },
    {
      set: 'everyday-14',
      measured:
        '0.880 / 0.763 with the code before the fifteenth session, 0.880 / 0.773 after its first two changes (blind, terse keyword queries), 0.960 / 0.830 tuned on, an AVX-512 VNNI host, 2026-11-30',
      recallAt5: 0.9,
      mrr: 0.77,
    },
    {
      set: 'everyday-15',
      measured:
        "0.900 / 0.681 with the code before the fifteenth session, 0.960 / 0.726 after it (blind, developers' backlog tickets), an AVX-512 VNNI host, 2026-11-30",
      recallAt5: 0.9,
      mrr: 0.68,
    },
    {
      set: 'everyday-16',
      measured:
        '0.673 / 0.570 with the code before the fifteenth session, 0.694 / 0.589 after it (blind, requests spoken to a voice assistant), 0.755 / 0.648 tuned on, an AVX-512 VNNI host, 2026-11-30',
      recallAt5: 0.69,
      mrr: 0.6,
    },
    { set: 'heldout', measured: '1.000 / 0.854, 1.000 / 0.861 with the kin on 2026-11-30', recallAt5: 0.83, mrr: 0.79 },
    {
      set: 'fresh',
      measured:
        '0.906 / 0.731, 0.922 / 0.730 on 2026-11-29, 0.922 / 0.738 with the kin, 0.922 / 0.735 with stated needs first, 0.938 / 0.751 at 0.8, 0.938 / 0.747 with four more kinds, 2026-11-30, 0.953 / 0.754 on an AVX2 host, 0.938 / 0.751 with the long-tail kinds (fourteenth session)',
      recallAt5: 0.9,
      mrr: 0.7,
    },
  ];
  for (const floor of floors) {
    it(
      `holds recall@5 and MRR on the ${floor.set} set over the full catalog at or above the floor (measured ${floor.measured})`,
      { timeout: 120_000 },
      async () => {
        const tasks = await loadDevset(fileURLToPath(new URL(`../../docs/discovery-${floor.set}.json`, import.meta.url)));
        expect(tasks.length).toBeGreaterThanOrEqual(12);
        const [catalog] = await app.deps.sql<{ n: number }[]>`select count(*)::int as n from apis where source = 'apis.guru'`;
        expect(catalog?.n).toBeGreaterThanOrEqual(2600);
        const result = await evaluateDiscovery(app.deps.sql, app.directoryIndex, tasks);
        // The held-out sets' misses stay out of the failure message: reading them is how tuning on them starts.
        const tuning = floor.set === 'devset' || floor.set.startsWith('everyday');
        const context = JSON.stringify({ recallAt5: result.recallAt5, mrr: result.mrr, ...(tuning ? { misses: result.misses } : {}) }, null, 1);
        expect(result.unknownExpected, context).toEqual([]);
        expect(result.recallAt5, context).toBeGreaterThanOrEqual(floor.recallAt5);
        expect(result.mrr, context).toBeGreaterThanOrEqual(floor.mrr);
      },
    );
  }

  it('reaches an API through a word the catalog does not use (WordNet) and through a name written as one word', async () => {
    // "wages" is a word few APIs use: WordNet adds "salary" and "earnings" at a fraction of its weight.
    const wages = expectOk<Discovery & { interpreted: { expansions: string[] } }>(
      await discover('q=pay%20my%20employees%20their%20wages%20every%20month'),
    );
    expect(wages.interpreted.expansions).toEqual(expect.arrayContaining(['salary', 'earnings']));
    expect(wages.results.slice(0, 5).map((r) => r.api.id)).toEqual(
      expect.arrayContaining([expect.stringMatching(/^(payrun\.io|xero\.com-xero-payroll-au|paylocity\.com)$/)]),
    );
    const wine = expectOk<Discovery>(await discover('q=how%20good%20is%20this%20bottle%20of%20wine'));
    expect(wine.results[0]?.api.id).toBe('globalwinescore.com');
  });
});

describe('dense retrieval in discovery (sentence embeddings, fused with the word ranking)', () => {
  it('finds APIs by meaning too, says so in the reason, and ranks by words alone when the model is off', async () => {
    const q = `q=${encodeURIComponent('is this link safe to open')}`;
    const body = expectOk<Discovery>(await discover(q));
    const byMeaning = body.results.filter((r) => /close in meaning to the task \(similarity 0\.\d\d\)/.test(r.reason));
    expect(byMeaning.length).toBeGreaterThan(0);
    // Fused scores (word score + weight x similarity) over the best one: the first is 1, best first.
    expect(body.results[0]!.score).toBe(1);
    expect(body.results.map((r) => r.score)).toEqual([...body.results.map((r) => r.score)].sort((a, b) => b - a));

    // With the answer cache on: the first app's answer (same Redis, same database) must not be served here.
    const wordsOnly = await createTestApp({ DISCOVERY_MODEL_DIR: 'off' });
    try {
      const plain = expectOk<Discovery>(await wordsOnly.inject({ method: 'GET', url: `/api/v1/discover?${q}` }));
      expect(plain.results.every((r) => !/close in meaning/.test(r.reason))).toBe(true);
      expect(plain.results.map((r) => r.api.id)).not.toEqual(body.results.map((r) => r.api.id));
      // A need the wording names (a person to "text") still finds its kind of service by words alone.
      const task = encodeURIComponent("text the whole team that tonight's practice is off because of the rain");
      const texted = expectOk<Discovery & { interpreted: { capabilities: string[] } }>(
        await wordsOnly.inject({ method: 'GET', url: `/api/v1/discover?q=${task}&limit=5` }),
      );
      expect(texted.interpreted.capabilities).toEqual(['sms']);
      expect(texted.results.map((r) => r.api.id)).toContain('twilio.com-api');
    } finally {
      await wordsOnly.close();
    }
  });

  it('ranks by words, and keeps answering, when the embedding model fails', async () => {
    const failing = await createTestApp({ DIRECTORY_CACHE_SECONDS: '0' });
    const warnings: string[] = [];
    try {
      const q = `/api/v1/discover?q=${encodeURIComponent('turn an address into coordinates')}`;
      expect(expectOk<Discovery>(await failing.inject({ method: 'GET', url: q })).results.some((r) => /close in meaning/.test(r.reason))).toBe(true);
      const warn = failing.log.warn.bind(failing.log);
      failing.log.warn = ((object: unknown, message?: string) => {
        warnings.push(String(message));
        warn(object as object, message);
      }) as typeof failing.log.warn;
      // The model's session is released under the index: every embedding now throws.
      await (await failing.directoryIndex.embeddings!.model())!.close();
      const body = expectOk<Discovery>(await failing.inject({ method: 'GET', url: `${q}%20please` }));
      expect(body.results.length).toBeGreaterThan(0);
      expect(body.results.every((r) => !/close in meaning/.test(r.reason))).toBe(true);
      expect(warnings).toContain('discovery: the embedding model failed; ranking by words only');
    } finally {
      await failing.close();
    }
  });

  it('keeps every stored vector current: the import embeds only what changed, and an index load embeds an API that has none', async () => {
    const { sql } = app.deps;
    const [api] = await sql<{ id: string; description: string }[]>`select id, description from apis where id = 'globalwinescore.com'`;
    const embedder = await loadEmbedder(DEFAULT_MODEL_DIR);
    try {
      expect(await embedCatalog(sql, embedder)).toBe(0);
      await sql`update apis set description = ${'Scores for ships and submarines: displacement, tonnage and hull ratings. ' + api!.description} where id = ${api!.id}`;
      // Limited to other APIs, the stale one is left for later; named, it is the only one computed.
      expect(await embedCatalog(sql, embedder, () => {}, ['twilio.com-twilio_notify_v1'])).toBe(0);
      expect(await embedCatalog(sql, embedder, () => {}, [api!.id])).toBe(1);
      expect(await embedCatalog(sql, embedder)).toBe(0);
    } finally {
      await embedder.close();
    }
    // An API registered after the last import has no stored vector: the index embeds it when it loads.
    await sql`delete from api_embeddings where api_id = ${api!.id}`;
    const fresh = await createTestApp({ DIRECTORY_CACHE_SECONDS: '0' });
    try {
      const body = expectOk<Discovery>(
        await fresh.inject({ method: 'GET', url: `/api/v1/discover?q=${encodeURIComponent('hull ratings and tonnage of submarines')}&limit=5` }),
      );
      const hit = body.results.find((r) => r.api.id === api!.id);
      expect(hit?.reason).toMatch(/close in meaning/);
    } finally {
      await fresh.close();
    }
    // Checks the whole catalog's vectors, then a new app loads its index (and the model, and the
    // capability vectors, in each ranking worker): a minute on a busy host.
  }, 120_000);
});
