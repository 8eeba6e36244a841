import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_MODEL_DIR, loadEmbedder, type Embedder } from '#core/directory';

// The model the provisioning scripts build (scripts/lib.sh, ensure_embedding_model).
const modelDir = process.env.DISCOVERY_EMBEDDING_MODEL_DIR ?? DEFAULT_MODEL_DIR;

/** Written by scripts/build-embedding-model.py: Hugging Face's token ids and float32 numpy vectors. */
interface Reference {
  maxTokens: number;
  sentences: { text: string; ids: number[]; embedding: number[] }[];
}

// int8 products are computed with whatever instructions the CPU offers, so the cosines depend on the
// host: where the model was first built, 0.983 for "?" (3 tokens) and 0.990-0.995 for the others; on
// an AMD EPYC host with AVX2 but no AVX-512 VNNI, 0.976 for "?" and 0.989-0.995 for the others, mean
// 0.990. A broken quantization (one scale per matrix) gave 0.86-0.98, so these floors still catch one.
const INT8_COSINE_FLOOR = 0.97;
const INT8_COSINE_MEAN_FLOOR = 0.985;

const dot = (a: ArrayLike<number>, b: ArrayLike<number>) => {
  let sum = 0;
  for (let i = 0; i < a.length; i++) sum += a[i]! * b[i]!;
  return sum;
};

describe('the discovery embedding model', () => {
  let embedder: Embedder;
  let reference: Reference;

  beforeAll(async () => {
    reference = JSON.parse(readFileSync(join(modelDir, 'reference.json'), 'utf8')) as Reference;
    embedder = await loadEmbedder(modelDir);
  });
  afterAll(() => embedder?.close());

  it('tokenizes every reference sentence to the ids of Hugging Face’s tokenizer', () => {
    expect(reference.sentences.length).toBeGreaterThanOrEqual(8);
    // The long one is cut to the limit with [SEP] kept.
    expect(reference.sentences.some((s) => s.ids.length === reference.maxTokens)).toBe(true);
    for (const sentence of reference.sentences) expect(embedder.tokenize(sentence.text), sentence.text).toEqual(sentence.ids);
  });

  it('gives unit vectors close to the float model’s', async () => {
    const vectors = await embedder.embed(reference.sentences.map((s) => s.text));
    const cosines = reference.sentences.map((s, k) => ({ text: s.text.slice(0, 40), cosine: dot(vectors[k]!, s.embedding) }));
    expect(embedder.dimensions).toBe(384);
    for (const [k, vector] of vectors.entries()) {
      expect(vector.length).toBe(384);
      expect(Math.abs(Math.sqrt(dot(vector, vector)) - 1), reference.sentences[k]!.text).toBeLessThan(1e-5);
    }
    expect(Math.min(...cosines.map((c) => c.cosine)), JSON.stringify(cosines)).toBeGreaterThanOrEqual(INT8_COSINE_FLOOR);
    const mean = cosines.reduce((sum, c) => sum + c.cosine, 0) / cosines.length;
    expect(mean, JSON.stringify(cosines)).toBeGreaterThanOrEqual(INT8_COSINE_MEAN_FLOOR);
  });

  it('gives a text the same vector alone as among others', async () => {
    const texts = [
      ...reference.sentences.map((s) => s.text),
      ...Array.from({ length: 40 }, (_, k) => `API ${k}: ${'currency rates '.repeat(k % 9)}`),
    ];
    const together = await embedder.embed(texts);
    for (const [k, text] of texts.entries()) {
      const [alone] = await embedder.embed([text]);
      const worst = Math.max(...alone!.map((x, j) => Math.abs(x - together[k]![j]!)));
      expect(worst, text).toBeLessThan(1e-5);
    }
    expect(await embedder.embed([])).toEqual([]);
  });

  it('puts a task nearer the API that does it than an unrelated one', async () => {
    const [task, scanner, weather, sms, sendText] = await embedder.embed([
      'is this link safe to open',
      'URL reputation and malware scanning',
      'weather forecast',
      'SMS gateway: deliver text messages to mobile phones',
      'send a text message to my phone',
    ]);
    expect(dot(task!, scanner!)).toBeGreaterThan(dot(task!, weather!) + 0.2);
    expect(dot(sendText!, sms!)).toBeGreaterThan(dot(sendText!, scanner!) + 0.2);
    expect(dot(sendText!, sms!)).toBeGreaterThan(dot(sendText!, weather!) + 0.2);
  });

  it('scores a task against a catalog of vectors natively, as dot products', async () => {
    const vectors = await embedder.embed(['URL reputation and malware scanning', 'weather forecast', 'SMS gateway', 'currency exchange rates']);
    const catalog = new Float32Array(vectors.length * embedder.dimensions);
    vectors.forEach((v, i) => catalog.set(v, i * embedder.dimensions));
    const [task] = await embedder.embed(['is this link safe to open']);
    const scores = await embedder.similarities(task!, catalog);
    expect(scores.length).toBe(vectors.length);
    vectors.forEach((v, i) => expect(scores[i]).toBeCloseTo(dot(task!, v), 5));
  });

  it('names the directory and how to build it when the model is missing', async () => {
    const missing = join(modelDir, 'no-such-model');
    await expect(loadEmbedder(missing)).rejects.toThrow(new RegExp(`${missing.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}.*npm run up`));
  });
});
