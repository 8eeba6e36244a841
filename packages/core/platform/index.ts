export { ChangeFeed } from './change-feed.js';
export { ERROR_STATUS, PlatformError, notFound } from './errors.js';
export type { ErrorCode } from './errors.js';
export { createRedis } from './redis.js';
export { cachedJson, cachedText } from './response-cache.js';
export { connectionContext, isDevMasterKey, keyHint, masterKeySetting, openSecret, platformKeyContext, sealSecret } from './secret-box.js';
export { SettingsError, envFlag, loadSettingsOrExit, parseSettings, sharedSettings } from './settings.js';
export { TemporalGateway } from './temporal.js';
