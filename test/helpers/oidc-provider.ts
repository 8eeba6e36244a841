// The loopback OAuth provider (oidc-provider) lives in packages/fixtures, shared with `npm run demo`.
import { runApiCli } from '#cli/api-cli';
import type { TestOAuthProvider } from '#fixtures/oidc-provider';

export * from '#fixtures/oidc-provider';

/**
 * Registers the provider's client as the operator's OAuth app for its host, as an operator would:
 * `npm run api -- oauth-app set` with the secret on standard input.
 */
export function registerOperatorOAuthApp(provider: TestOAuthProvider, env: NodeJS.ProcessEnv): Promise<string> {
  return runApiCli(
    [
      'oauth-app',
      'set',
      '--provider',
      provider.host,
      '--client-id',
      provider.clientId,
      '--client-secret-stdin',
      '--authorization-url',
      provider.authorizationUrl,
      '--token-url',
      provider.tokenUrl,
      '--revocation-url',
      provider.revocationUrl,
    ],
    env,
    { readStdin: async () => provider.clientSecret },
  );
}
