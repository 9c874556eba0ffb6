import * as fs from 'node:fs';
import * as path from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';

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
