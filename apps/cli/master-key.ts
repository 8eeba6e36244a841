import { connectionContext, openSecret, platformKeyContext, sealSecret } from '#core/platform';
import { webhookSecretContext } from '#core/notifications';
import {
  oauthAccessTokenContext,
  oauthClientSecretContext,
  oauthProviderSecretContext,
  oauthRefreshTokenContext,
  oauthVerifierContext,
} from '#core/oauth';
import { lockProviderSecrets, setProviderSecret } from '#db/oauth-provider';
import {
  lockSealedAppSecrets,
  lockSealedConnectionTokens,
  lockSealedVerifiers,
  setSealedAppSecret,
  setSealedConnectionTokens,
  setSealedVerifier,
} from '#db/oauth';
import type { Sql } from '#db/sql';

export interface RotationReport {
  connections: number;
  platformKeys: number;
  webhookSecrets: number;
  /** OAuth apps' client secrets. */
  oauthApps: number;
  /** OAuth connections (their access and refresh tokens). */
  oauthConnections: number;
  /** Consent flows under way (their PKCE verifiers). */
  oauthAuthorizations: number;
  /** The authorization server's own secrets (signing keys, cookie keys). */
  authorizationServerSecrets: number;
}

export class RotationError extends Error {
  override name = 'RotationError';
}

/**
 * Re-seals every secret the secret box holds (bring-your-own keys in `connections`, platform keys in
 * `apis`, webhook signing secrets in `webhook_endpoints`, OAuth client secrets, tokens and PKCE
 * verifiers, the authorization server's signing and cookie keys) from `oldKey` to `newKey`, in one transaction: either every row moves to the new key or
 * none does. Each secret is opened under the old key first; one that does not open (a wrong old
 * key, a row already rotated) aborts the whole run with the row named, never its secret.
 */
export async function rotateMasterKey(sql: Sql, oldKey: Buffer, newKey: Buffer): Promise<RotationReport> {
  if (oldKey.equals(newKey)) throw new RotationError('the new key is the old key');
  return sql.begin(async (tx) => {
    // Rows are locked so a connection saved meanwhile waits for the rotation instead of being lost.
    const connections = await tx<{ account_id: string; api_id: string; key_encrypted: Buffer }[]>`
      select account_id, api_id, key_encrypted from connections order by account_id, api_id for update`;
    const apis = await tx<{ id: string; platform_key_encrypted: Buffer }[]>`
      select id, platform_key_encrypted from apis where platform_key_encrypted is not null order by id for update`;
    const endpoints = await tx<{ id: string; secret_sealed: Buffer; previous_secret_sealed: Buffer | null }[]>`
      select id, secret_sealed, previous_secret_sealed from webhook_endpoints order by id for update`;
    const reseal = (sealed: Buffer, context: string, what: string) => {
      let plain: string;
      try {
        plain = openSecret(oldKey, sealed, context);
      } catch {
        throw new RotationError(`${what} does not open under the old key (wrong old key, or already rotated?); nothing was changed`);
      }
      return sealSecret(newKey, plain, context);
    };
    for (const row of connections) {
      const sealed = reseal(
        row.key_encrypted,
        connectionContext(row.account_id, row.api_id),
        `the connection of account ${row.account_id} to ${row.api_id}`,
      );
      await tx`update connections set key_encrypted = ${sealed} where account_id = ${row.account_id} and api_id = ${row.api_id}`;
    }
    for (const row of apis) {
      const sealed = reseal(row.platform_key_encrypted, platformKeyContext(row.id), `the platform key of ${row.id}`);
      await tx`update apis set platform_key_encrypted = ${sealed} where id = ${row.id}`;
    }
    for (const row of endpoints) {
      const context = webhookSecretContext(row.id);
      const sealed = reseal(row.secret_sealed, context, `the signing secret of webhook ${row.id}`);
      const previous =
        row.previous_secret_sealed === null ? null : reseal(row.previous_secret_sealed, context, `the previous signing secret of webhook ${row.id}`);
      await tx`update webhook_endpoints set secret_sealed = ${sealed}, previous_secret_sealed = ${previous} where id = ${row.id}`;
    }
    const apps = await lockSealedAppSecrets(tx);
    for (const app of apps) {
      const context = oauthClientSecretContext(app.accountId, app.provider);
      await setSealedAppSecret(tx, app.id, reseal(app.sealed, context, `the client secret of the OAuth app ${app.id} (${app.provider})`));
    }
    const grants = await lockSealedConnectionTokens(tx);
    for (const grant of grants) {
      const access = reseal(grant.access, oauthAccessTokenContext(grant.id), `the access token of OAuth connection ${grant.id}`);
      const refresh =
        grant.refresh === null
          ? null
          : reseal(grant.refresh, oauthRefreshTokenContext(grant.id), `the refresh token of OAuth connection ${grant.id}`);
      await setSealedConnectionTokens(tx, grant.id, access, refresh);
    }
    const flows = await lockSealedVerifiers(tx);
    for (const flow of flows) {
      await setSealedVerifier(
        tx,
        flow.stateHash,
        reseal(flow.sealed, oauthVerifierContext(flow.stateHash), 'the PKCE verifier of a consent flow under way'),
      );
    }
    const serverSecrets = await lockProviderSecrets(tx);
    for (const secret of serverSecrets) {
      await setProviderSecret(
        tx,
        secret.name,
        reseal(secret.sealed, oauthProviderSecretContext(secret.name), `the authorization server's ${secret.name}`),
      );
    }
    return {
      connections: connections.length,
      platformKeys: apis.length,
      webhookSecrets: endpoints.length,
      oauthApps: apps.length,
      oauthConnections: grants.length,
      oauthAuthorizations: flows.length,
      authorizationServerSecrets: serverSecrets.length,
    };
  });
}
