import { openSecret, sealSecret } from '#core/platform';

/**
 * The secret-box contexts (AES-256-GCM associated data, see core/platform's secret-box.ts) of the
 * OAuth secrets. Each binds a sealed value to the row it belongs to, so a blob copied to another row,
 * or an access token swapped with a refresh token, does not open.
 */

/** An app's client secret, bound to its owner (the operator or an account) and provider: known before the row exists. */
export const oauthClientSecretContext = (accountId: string | null, provider: string) => `oauth-app:${accountId ?? 'operator'}:${provider}`;
export const oauthAccessTokenContext = (connectionId: string) => `oauth-access:${connectionId}`;
export const oauthRefreshTokenContext = (connectionId: string) => `oauth-refresh:${connectionId}`;
/** A consent flow's PKCE verifier, bound to the hash of its state. */
export const oauthVerifierContext = (stateHash: string) => `oauth-verifier:${stateHash}`;

/** A secret of the platform's own authorization server (its signing keys, its cookie keys), bound to its name. */
export const oauthProviderSecretContext = (name: string) => `oauth-provider:${name}`;

/** The tokens of one connection, sealed for its row. */
export function sealTokens(masterKey: Buffer, connectionId: string, tokens: { accessToken: string; refreshToken: string | null }) {
  return {
    accessTokenSealed: sealSecret(masterKey, tokens.accessToken, oauthAccessTokenContext(connectionId)),
    refreshTokenSealed: tokens.refreshToken === null ? null : sealSecret(masterKey, tokens.refreshToken, oauthRefreshTokenContext(connectionId)),
  };
}

export const openAccessToken = (masterKey: Buffer, connectionId: string, sealed: Buffer) =>
  openSecret(masterKey, sealed, oauthAccessTokenContext(connectionId));

export const openRefreshToken = (masterKey: Buffer, connectionId: string, sealed: Buffer) =>
  openSecret(masterKey, sealed, oauthRefreshTokenContext(connectionId));
