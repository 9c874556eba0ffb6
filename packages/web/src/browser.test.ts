import * as fs from 'node:fs';
import * as path from 'node:path';
import { chromium, type Browser, type BrowserContext, type BrowserContextOptions, type ConsoleMessage, type Page, type Route } from 'playwright-core';
import { createLogger, loadModelConfig, until as poll } from '@neatroots/platform';
// The browser specs run the web app as neatroots serves it; outside its tests the web app may not import neatroots.
// eslint-disable-next-line @nx/enforce-module-boundaries
import { startEmbedded, type EmbeddedApp, type EmbeddedOptions } from 'neatroots';
// eslint-disable-next-line @nx/enforce-module-boundaries
import { tempHome, testConfig } from '../../neatroots/src/test-app.test';

/**
 * The web app's browser tests drive Debian's Chromium (scripts/chromium.sh installs it; .ci/run
 * exports CHROMIUM_PATH), headless, with playwright-core: no browser is downloaded at install.
 * Without a Chromium they skip with one line, unless NEATROOTS_REQUIRE_SERVICES is set (CI),
 * where they must run.
 */
export function chromiumPath(env: NodeJS.ProcessEnv = process.env): string | null {
  const candidates = [env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser'].filter((p): p is string => !!p);
  return candidates.find((p) => fs.existsSync(p)) ?? null;
}

/** The path, or null after saying once why the browser tests skip; throws in CI. */
export function chromiumOrSkip(suite: string): string | null {
  const p = chromiumPath();
  if (p) return p;
  const why = `no Chromium (set CHROMIUM_PATH or run scripts/chromium.sh)`;
  if (process.env.NEATROOTS_REQUIRE_SERVICES) throw new Error(`${suite}: ${why}, and NEATROOTS_REQUIRE_SERVICES is set`);
  process.stderr.write(`skipping ${suite}: ${why}\n`);
  return null;
}

/**
 * What the api's Content-Security-Policy refused on any page of a browser launched here (the
 * browser says so on the page's console): each test that saw one fails, whatever page it was
 * on and whether or not its spec listens to the console. A page that needs something the
 * policy refuses (an inline style, a font or script from elsewhere) fails its specs here, not
 * only in a user's browser.
 */
const cspViolations: string[] = [];
afterEach(() => {
  const seen = cspViolations.splice(0);
  if (seen.length) throw new Error(`the Content Security Policy refused:\n${seen.join('\n')}`);
});

/** The refusals seen since the last test, taken: a test that provokes one on purpose checks it and the test passes. */
export function takeCspViolations(): string[] {
  return cspViolations.splice(0);
}

function watchCsp(ctx: BrowserContext): BrowserContext {
  ctx.on('console', (m) => {
    if (m.text().includes('Content Security Policy')) cspViolations.push(`${m.page()?.url() ?? '(no page)'}: ${m.text()}`);
  });
  return ctx;
}

export async function launch(executablePath: string): Promise<Browser> {
  const browser = await chromium.launch({ executablePath, headless: true, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
  // Every context it opens is watched (browser.newPage opens its context through newContext).
  const newContext = browser.newContext.bind(browser);
  browser.newContext = async (options) => watchCsp(await newContext(options));
  return browser;
}

/** Where screenshots go for a reviewer to look at (gitignored). */
export const SCREENSHOTS = path.resolve(__dirname, '..', '..', '..', 'test-results', 'screenshots');

export async function shot(page: Page, name: string): Promise<void> {
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: path.join(SCREENSHOTS, `${name}.png`), fullPage: false });
}

/** The app's build the api serves: made by `npm run build`, required here. */
export function requireBuiltApp(): void {
  const index = path.resolve(__dirname, '..', 'dist', 'index.html');
  if (!fs.existsSync(index)) throw new Error(`the web app is not built (${index} missing): run npm run build -w @neatroots/web`);
}

/** The embedded app a browser spec runs against, and the browser it drives. */
export interface BrowserApp {
  /** The app's data folder: a new temporary one. */
  home: string;
  app: EmbeddedApp;
  browser: Browser;
  /** The app's address, the API's and the web app's. */
  url: string;
  /** Closes the browser, then the app, and removes the home. */
  close(): Promise<void>;
}

export interface BrowserAppOptions extends Omit<EmbeddedOptions, 'config' | 'models'> {
  /** The temporary home's name, before its random end (nr-web-review: nr-web-review-XXXXXX). */
  prefix: string;
  /** The app's settings (testConfig's): its keys, the spec's own servers. */
  config?: Record<string, string>;
  /** The model endpoints' settings (loadModelConfig's); none: the built-in fast classifier answers. */
  models?: Record<string, string>;
  /** Check files written under the home's checks/ before the app starts, by file name. */
  checks?: Record<string, string>;
}

/**
 * What a browser spec's beforeAll starts: the built web app required, a temporary home, the
 * embedded app on it (its database in memory, no check watcher, errors alone logged, unless the
 * options say otherwise) and a headless Chromium at `exe`. A start that fails closes what it
 * started before it throws. What the spec starts itself (a fake model or GitHub, an agent's
 * client, its data) stays in the spec: its clients closed before close(), its servers after.
 */
export async function startBrowserApp(exe: string, o: BrowserAppOptions): Promise<BrowserApp> {
  requireBuiltApp();
  const { prefix, config, models, checks, ...embedded } = o;
  const home = tempHome(prefix, checks);
  let app: EmbeddedApp | undefined;
  let browser: Browser | undefined;
  const close = async () => {
    // Each step runs whatever the one before did; the first failure is thrown at the end.
    const failures: unknown[] = [];
    for (const step of [() => browser?.close(), () => app?.close(), () => fs.rmSync(home, { recursive: true, force: true })]) {
      await Promise.resolve().then(step).catch((e: unknown) => failures.push(e));
    }
    if (failures.length) throw failures[0];
  };
  try {
    app = await startEmbedded({
      config: testConfig(home, config),
      models: loadModelConfig(models ?? {}),
      inMemoryDb: true,
      watch: false,
      log: createLogger({ level: 'error' }),
      ...embedded,
    });
    browser = await launch(exe);
  } catch (e) {
    await close().catch(() => undefined);
    throw e;
  }
  return { home, app, browser, url: `http://127.0.0.1:${app.httpPort}`, close };
}

/** Who a spec signs in as, and where the errors of the pages it opens go. */
export interface SignIn {
  /** The app's address. */
  url: string;
  project: string;
  key: string;
  /** Each console error and uncaught exception of the page, as `<page's url>: <text>`: a spec's afterEach expects none. */
  errors: string[];
  /** Which console messages are errors of the page: by default those of type error. */
  isError?: (m: ConsoleMessage) => boolean;
}

/**
 * A new page signed in as a user signs in (the project and key typed on the sign-in page), on
 * Home, its errors gathered: in `on` when it is a context of the spec's own (one with a clock
 * installed), else in a new context of the browser with `context` (1440 by 900 unless told).
 */
export async function openSignedIn(on: Browser | BrowserContext, s: SignIn, context: BrowserContextOptions = { viewport: { width: 1440, height: 900 } }): Promise<Page> {
  const page = await ('newContext' in on ? await on.newContext(context) : on).newPage();
  const isError = s.isError ?? ((m: ConsoleMessage) => m.type() === 'error');
  page.on('console', (m) => isError(m) && s.errors.push(`${page.url()}: ${m.text()}`));
  page.on('pageerror', (e) => s.errors.push(`${page.url()}: ${e.message}`));
  await page.goto(`${s.url}/`);
  await page.getByLabel('Project').fill(s.project);
  await page.getByLabel('API key').fill(s.key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Home', level: 1 }).waitFor();
  return page;
}

/**
 * Holds the page's requests that `match` until `release()`: what the page shows while its
 * data is on the way can be looked at, with no timing. `asked` resolves once one is held.
 */
export async function hold(page: Page, match: (u: URL) => boolean): Promise<{ asked: Promise<void>; release(): void }> {
  let open!: () => void;
  const gate = new Promise<void>((r) => (open = r));
  let seen!: () => void;
  const asked = new Promise<void>((r) => (seen = r));
  await page.route(match, async (route: Route) => {
    seen();
    await gate;
    await route.continue();
  });
  // Left in place once released (what it holds then goes straight on): a route taken away
  // while it holds a request answers that request itself.
  return { asked, release: open };
}

/**
 * The list in which a describe's pages (opened with openSignedIn) gather their console errors
 * and uncaught exceptions: after each of its tests it is emptied, and the test fails if it held any.
 */
export function pageErrors(): string[] {
  const errors: string[] = [];
  afterEach(() => {
    expect(errors.splice(0)).toEqual([]);
  });
  return errors;
}

/**
 * Polls `fn` every 100 ms until it gives something truthy (not null, 0 or an empty string either),
 * and answers that; after `ms` it throws, naming `what`. 45 s unless told: a wait that fails
 * says what it waited for before jest's 60 s for a test.
 */
export function until<T>(what: string, fn: () => Promise<T | null | undefined | false | 0 | ''>, ms = 45_000): Promise<T> {
  return poll(what, async () => (await fn()) || undefined, ms) as Promise<T>;
}
