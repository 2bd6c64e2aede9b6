// Runs the browser client (apps/signal/static/signal/stream-client.js) under Node, whose WebCrypto
// and WebSocket are the browser APIs: connects, optionally subscribes, and prints one JSON line per
// step and per decrypted room message, for tests/signal/test_browser_client.py.
// Usage: node --experimental-websocket run_client.cjs <client.js> <url> <token> <info> [room]
"use strict";
const { SignalStream } = require(process.argv[2]);
const [url, token, info, room] = process.argv.slice(3);
const say = (line) => console.log(JSON.stringify(line));

(async () => {
  const stream = new SignalStream(url, token, {
    info,
    onMessage: (message) => say(message),
    onClose: (close, error) => {
      say({ closed: close.code, error: error ? error.code : null });
      process.exit(0);
    },
  });
  try {
    const connected = await stream.connect();
    say({ connected: connected.sessionId });
  } catch (error) {
    say({ refused: error.code });
    return;
  }
  if (room) {
    try {
      say(await stream.subscribe(room));
    } catch (error) {
      say({ subscribeRefused: error.code });
    }
  }
  say({ ready: true });
})();
