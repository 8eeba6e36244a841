import type { OAuthClientMetadata, OAuthClientProvider, StoredOAuthClientInformation, StoredOAuthTokens } from '@modelcontextprotocol/client';

/**
 * What an MCP client that speaks OAuth keeps, in memory: its registration, its tokens and its PKCE
 * verifier, as the official SDK asks an `OAuthClientProvider` to. `redirectToAuthorization` records
 * the URL the person's browser would be sent to; the test plays the browser.
 */
export class MemoryOAuthClient implements OAuthClientProvider {
  registration: StoredOAuthClientInformation | undefined;
  stored: StoredOAuthTokens | undefined;
  verifier = '';
  /** Every authorization URL the SDK asked to open, in order. */
  readonly authorizationUrls: URL[] = [];

  constructor(
    readonly redirectUri: string,
    readonly name = 'Test MCP client',
  ) {}

  get redirectUrl() {
    return this.redirectUri;
  }
  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: this.name,
      redirect_uris: [this.redirectUri],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }
  clientInformation() {
    return this.registration;
  }
  saveClientInformation(information: StoredOAuthClientInformation) {
    this.registration = information;
  }
  tokens() {
    return this.stored;
  }
  saveTokens(tokens: StoredOAuthTokens) {
    this.stored = tokens;
  }
  redirectToAuthorization(url: URL) {
    this.authorizationUrls.push(url);
  }
  saveCodeVerifier(verifier: string) {
    this.verifier = verifier;
  }
  codeVerifier() {
    return this.verifier;
  }
}

/** A person's browser over plain HTTP: a cookie jar and redirects followed by hand. */
export class CookieJar {
  private readonly cookies = new Map<string, string>();

  header(extra?: string): string {
    const own = [...this.cookies].map(([name, value]) => `${name}=${value}`).join('; ');
    return [own, extra].filter(Boolean).join('; ');
  }

  remember(response: Response): void {
    for (const line of response.headers.getSetCookie()) {
      const [pair] = line.split(';');
      const at = pair!.indexOf('=');
      const name = pair!.slice(0, at).trim();
      const value = pair!.slice(at + 1).trim();
      if (/expires=Thu, 01 Jan 1970/i.test(line) || value === '') this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
  }

  /**
   * GETs `url` and follows redirects while they stay on `origin`; returns the first URL that leaves
   * it or that `stop` accepts (the consent page, the client's redirect URI).
   */
  async follow(url: string, stop: (url: URL) => boolean, origin: string): Promise<URL> {
    let next = new URL(url);
    for (let step = 0; step < 10; step += 1) {
      if (stop(next) || next.origin !== origin) return next;
      const response = await fetch(next, { redirect: 'manual', headers: { cookie: this.header() } });
      this.remember(response);
      const location = response.headers.get('location');
      if (response.status < 300 || response.status >= 400 || !location) {
        throw new Error(`GET ${next.pathname} answered ${response.status}: ${(await response.text()).slice(0, 400)}`);
      }
      next = new URL(location, next);
    }
    throw new Error('too many redirects');
  }
}
