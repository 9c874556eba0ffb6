'use strict';
// A chat-completions server for the benches: every request answered after a fixed delay with the
// content `answer` makes of its messages (the real openai client talks to it over HTTP).
const http = require('node:http');

/**
 * `answer({ messages, model })` returns the assistant's content for a request. Resolves to its
 * base URL, how many requests it took (`requests()`), and `close()`.
 */
function fakeChatServer(answer, latencyMs) {
  let requests = 0;
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      requests++;
      const { messages, model } = JSON.parse(body);
      const content = answer({ messages, model });
      setTimeout(() => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ id: 'x', object: 'chat.completion', created: 0, model, choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }] }));
      }, latencyMs);
    });
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({
        url: `http://127.0.0.1:${server.address().port}/v1`,
        requests: () => requests,
        resetRequests: () => void (requests = 0),
        close: () => new Promise((r) => server.close(r)),
      }),
    ),
  );
}

module.exports = { fakeChatServer };
