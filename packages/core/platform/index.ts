export { ChangeFeed } from './change-feed.js';
export { FeedCache, type FeedCacheOptions } from './feed-cache.js';
export { ERROR_STATUS, PlatformError, notFound } from './errors.js';
export type { ErrorCode } from './errors.js';
export { ADD_JOB_TIMEOUT_MS, addJob, createQueue } from './jobs.js';
export { withTimeout } from './timeout.js';
export type { JobDeclaration } from './jobs.js';
export type { Logger } from './logger.js';
export { BlockLogWriter, type BlockLogWriterOptions } from './log-writer.js';
export { timeOrderedUuid } from './ids.js';
export { createRedis } from './redis.js';
export type { RedisErrorLog } from './redis.js';
export { cachedBytes, cachedJson, cachedText } from './response-cache.js';
export { connectionContext, isDevMasterKey, keyHint, masterKeySetting, openSecret, platformKeyContext, sealSecret } from './secret-box.js';
export { SettingsError, envFlag, loadSettingsOrExit, parseSettings, sharedSettings } from './settings.js';
export { TemporalGateway, temporalTls, type TemporalTlsSettings } from './temporal.js';
export {
  DEV_CODEC_KEYS,
  ENCRYPTED_ENCODING,
  EncryptionCodec,
  KEY_ID_METADATA,
  codecServerBody,
  fromCodecJson,
  isDevCodecKeys,
  parseCodecKeys,
  temporalDataConverter,
  toCodecJson,
} from './payload-codec.js';
export type { CodecKey, CodecServerBody } from './payload-codec.js';
export { readBounded } from './bounded-read.js';
export { BoundedLabel, createRegistry, metricsSettings, prom, serveMetrics, TallyCounter, TallyHistogram } from './metrics.js';
export type { Registry } from './metrics.js';
export { Tracing, extractTraceContext, spanContextOf, traceparentOf, tracingSettings } from './tracing.js';
export type { TracingOptions, TracingSettings } from './tracing.js';
