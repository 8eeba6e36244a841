/**
 * The sentence-embedding model of discovery's dense retrieval: all-MiniLM-L6-v2 with int8 weights,
 * run on the CPU by onnxruntime in this process. The provisioning scripts build its directory
 * (scripts/lib.sh, ensure_embedding_model; scripts/build-embedding-model.py): model.onnx takes
 * token ids and an attention mask and returns mean-pooled, unit-length vectors.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { InferenceSession } from 'onnxruntime-node';
import { WordPiece } from './wordpiece.js';

export interface Embedder {
  /** Names the model and its exact build: vectors of another one are not comparable. */
  readonly model: string;
  readonly dimensions: number;
  /** The token ids the model reads for a text: [CLS] ... [SEP], cut at the token limit. */
  tokenize(text: string): number[];
  /** One unit vector per text, in order. */
  embed(texts: readonly string[]): Promise<Float32Array[]>;
  /** Dot products of `query` with every row of `catalog` (rows x dimensions), computed natively. */
  similarities(query: Float32Array, catalog: Float32Array): Promise<Float32Array>;
  close(): Promise<void>;
}

interface Manifest {
  model: string;
  dimensions: number;
  maxTokens: number;
  maxPositions: number;
  sha256: string;
}

const BUILD_HINT = "`npm run up` or `npm test` builds it, as does `bash -c '. scripts/lib.sh; ensure_embedding_model'`";

async function readModelFile(dir: string, name: string): Promise<string> {
  try {
    return await readFile(join(dir, name), 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    throw new Error(`the embedding model is not built in ${dir} (no ${name}): ${BUILD_HINT}`, { cause: error });
  }
}

/**
 * Loads the model built in `dir` (about 0.3 s). `threads` is onnxruntime's intra-op thread count:
 * 1 by default, as the edge has other work for its cores. `maxTokens` defaults to the build's 128 (the model reads at most 512).
 */
export async function loadEmbedder(dir: string, options: { threads?: number; maxTokens?: number } = {}): Promise<Embedder> {
  const manifest = JSON.parse(await readModelFile(dir, 'manifest.json')) as Manifest;
  const tokenizer = new WordPiece(await readModelFile(dir, 'vocab.txt'));
  const maxTokens = options.maxTokens ?? manifest.maxTokens;
  if (!(maxTokens >= 2 && maxTokens <= manifest.maxPositions))
    throw new Error(`maxTokens must be between 2 and ${manifest.maxPositions}, not ${maxTokens}`);
  // Loaded here, not at the top: processes that never embed do not load the native library.
  const ort = await import('onnxruntime-node');
  const session: InferenceSession = await ort.InferenceSession.create(join(dir, 'model.onnx'), {
    intraOpNumThreads: options.threads ?? 1,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });

  // query [1, d] x catalog [n, d]^T in onnxruntime (a Gemm, about 0.07 ms for the catalog; 0.8 ms in JavaScript).
  const similarity = await ort.InferenceSession.create(join(dir, 'similarity.onnx'), {
    intraOpNumThreads: 1,
    interOpNumThreads: 1,
    executionMode: 'sequential',
  }).catch((error: unknown) => {
    throw new Error(`the embedding model in ${dir} has no usable similarity.onnx (built by an older script?): ${BUILD_HINT}`, { cause: error });
  });
  const d = manifest.dimensions;

  async function run(tokens: number[]): Promise<Float32Array> {
    const dims = [1, tokens.length];
    const ids = new ort.Tensor('int64', BigInt64Array.from(tokens, BigInt), dims);
    const mask = new ort.Tensor('int64', new BigInt64Array(tokens.length).fill(1n), dims);
    const output = await session.run({ input_ids: ids, attention_mask: mask });
    return (output.embedding!.data as Float32Array).slice(0, manifest.dimensions);
  }

  return {
    model: `${manifest.model}@${manifest.sha256.slice(0, 12)}`,
    dimensions: manifest.dimensions,
    tokenize: (text) => tokenizer.encode(text, maxTokens),
    // One text per run, though the graph takes padded batches: int8 dynamic quantization scales the
    // activations of a whole batch at once, so a batched vector would depend on its neighbours (by
    // up to 0.04 a component), and on one thread batches of 32 were 9% slower than single texts.
    async embed(texts) {
      const vectors: Float32Array[] = [];
      for (const text of texts) vectors.push(await run(tokenizer.encode(text, maxTokens)));
      return vectors;
    },
    async similarities(query, catalog) {
      const output = await similarity.run({
        query: new ort.Tensor('float32', query, [1, d]),
        catalog: new ort.Tensor('float32', catalog, [catalog.length / d, d]),
      });
      return output.scores!.data as Float32Array;
    },
    close: async () => {
      await Promise.all([session.release(), similarity.release()]);
    },
  };
}
