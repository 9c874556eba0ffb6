import { strings, UsageError } from './args';
import type { Command } from './cli';

/**
 * `neatroots mcp`: the MCP tools (create_check, preview_check, list_checks, get_check,
 * list_findings, get_run, list_spans) over stdio, for a coding agent that starts its MCP
 * servers as commands. The tools are the api's (POST /v1/mcp); this relays between the agent
 * and a running server, so the API key decides the project exactly as over HTTP. Standard
 * output carries MCP messages only; problems go to standard error.
 */
export const mcpCommand: Command = {
  usage: 'neatroots mcp [--url URL] [--key KEY]',
  summary: 'serve the MCP tools for coding agents over stdio (relayed to a running server)',
  help: `Serves neatroots' MCP tools on standard input and output, for coding agents that start MCP
servers as commands (docs/authoring.md has the configuration for common ones). Each message
is relayed to the running server's MCP endpoint (POST /v1/mcp), where the API key opens one
project and every tool acts in it: create_check, preview_check, list_checks, get_check,
list_findings, get_run, list_spans. Agents can save flag rules and questions, never halt rules.

Server: --url URL, its address (default NEATROOTS_URL, else http://127.0.0.1:8080; the MCP
endpoint's URL, ending in /v1/mcp as an HTTP configuration has it, is taken too); API key:
--key KEY (default NEATROOTS_API_KEY). Runs until the agent closes standard input and its last
requests are answered (at most 30 s later).`,
  flags: { url: { value: true }, key: { value: true } },
  async run(p, io) {
    if (p.positional.length) throw new UsageError(`mcp takes no arguments, got ${p.positional.join(' ')}`);
    // The server's address; the endpoint's own URL (…/v1/mcp, as in an HTTP configuration) names the same server.
    const url = (strings(p, 'url').at(-1) ?? io.env.NEATROOTS_URL ?? 'http://127.0.0.1:8080').replace(/\/+$/, '').replace(/\/v1\/mcp$/i, '');
    if (!/^https?:\/\/[^/]+/.test(url)) throw new UsageError(`--url must be an http(s) URL, got ${url}`);
    const key = strings(p, 'key').at(-1) ?? io.env.NEATROOTS_API_KEY;
    if (!key) throw new UsageError('an API key is needed: --key KEY or NEATROOTS_API_KEY');
    // The api package (Nest, the MCP SDK) loads only when this command runs.
    const { relayStdioToHttp } = await import('@neatroots/api');
    await relayStdioToHttp({ url, key, onError: (err) => io.err(`neatroots mcp: ${err.message}`) });
    return 0;
  },
};
