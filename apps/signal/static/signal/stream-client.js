/*
 * A browser client of signal's /stream (docs/services/signal.md, "The /stream protocol"), in plain
 * JavaScript on WebCrypto: ECDH P-256, HKDF-SHA256, AES-256-GCM. No dependencies.
 *
 *   const stream = new SignalStream("wss://shop.example/stream", accessToken, {
 *     info: "merchant-platform/signal/stream/v1",          // APP_ENV_WEBSOCKET_ECDH_INFO
 *     onMessage: (message) => console.log(message.room, message.name, message.payload),
 *   });
 *   await stream.connect();
 *   await stream.subscribe("merchant.5");
 */
(function (root) {
  "use strict";

  const VERSION = 1;
  const encoder = new TextEncoder();
  const decoder = new TextDecoder();

  function b64u(bytes) {
    let text = "";
    for (const byte of new Uint8Array(bytes)) text += String.fromCharCode(byte);
    return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }

  function unb64u(text) {
    const padded = text.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((text.length + 3) % 4);
    return Uint8Array.from(atob(padded), (c) => c.charCodeAt(0));
  }

  // 12 bytes: the direction (1 client to server, 2 server to client), three zero bytes, the
  // sequence as a 64-bit big-endian integer.
  function nonce(direction, sequence) {
    const bytes = new Uint8Array(12);
    bytes[0] = direction === "c2s" ? 1 : 2;
    new DataView(bytes.buffer).setBigUint64(4, BigInt(sequence));
    return bytes;
  }

  function associatedData(direction, sequence) {
    return encoder.encode(`signal/v${VERSION}/${direction}/${sequence}`);
  }

  class SignalError extends Error {
    constructor(code, message, closeCode) {
      super(`${code}: ${message}`);
      this.code = code;
      this.closeCode = closeCode;
    }
  }

  class SignalStream {
    constructor(url, token, options = {}) {
      this.url = url;
      this.token = token;
      this.info = options.info;
      this.onMessage = options.onMessage || (() => {});
      this.onEvent = options.onEvent || (() => {});
      this.onClose = options.onClose || (() => {});
      this.offsets = {}; // the last offset seen per room: give it to subscribe() after a reconnect
      this.sent = 0;
      this.received = 0;
      this.key = null;
      this.incoming = Promise.resolve(); // frames are opened one after the other, in order
      this.outgoing = Promise.resolve(); // and sealed and sent in order
      this.waiting = [];
    }

    connect() {
      return new Promise((resolve, reject) => {
        const socket = new WebSocket(this.url);
        this.socket = socket;
        let keyPair;
        socket.onopen = async () => {
          try {
            keyPair = await crypto.subtle.generateKey({ name: "ECDH", namedCurve: "P-256" }, false, ["deriveBits"]);
            const publicKey = await crypto.subtle.exportKey("raw", keyPair.publicKey);
            socket.send(JSON.stringify({ event: "handshake", version: VERSION, auth: { type: "Bearer", token: this.token }, publicKey: b64u(publicKey) }));
          } catch (error) {
            reject(error);
          }
        };
        socket.onmessage = (frame) => {
          this.incoming = this.incoming.then(() => this._receive(frame.data, keyPair, resolve, reject)).catch((error) => {
            reject(error);
            this._fail(error);
          });
        };
        socket.onclose = (event) => {
          this.key = null; // the key goes with the connection
          const error = this.lastError || new SignalError("CLOSED", event.reason || "closed", event.code);
          reject(error);
          for (const waiter of this.waiting.splice(0)) waiter.reject(error);
          this.onClose(event, this.lastError);
        };
      });
    }

    async _receive(text, keyPair, resolve, reject) {
      const frame = JSON.parse(text);
      if (frame.event === "error") {
        // Fatal, plaintext: the server closes next.
        this.lastError = new SignalError(frame.code, frame.message);
        reject(this.lastError);
        return;
      }
      if (frame.event === "connected") {
        if (this.key) throw new SignalError("PROTOCOL_ERROR", "a second connected event");
        const serverKey = await crypto.subtle.importKey("raw", unb64u(frame.publicKey), { name: "ECDH", namedCurve: "P-256" }, false, []);
        const shared = await crypto.subtle.deriveBits({ name: "ECDH", public: serverKey }, keyPair.privateKey, 256);
        const material = await crypto.subtle.importKey("raw", shared, "HKDF", false, ["deriveKey"]);
        this.key = await crypto.subtle.deriveKey(
          { name: "HKDF", hash: "SHA-256", salt: unb64u(frame.salt), info: encoder.encode(this.info) },
          material,
          { name: "AES-GCM", length: 256 },
          false,
          ["encrypt", "decrypt"],
        );
        this.connected = frame;
        resolve(frame);
        return;
      }
      if (!this.key || frame.seq !== this.received + 1) throw new SignalError("SEQUENCE_ERROR", `unexpected frame ${frame.seq}`);
      let plaintext;
      try {
        plaintext = await crypto.subtle.decrypt(
          { name: "AES-GCM", iv: nonce("s2c", frame.seq), additionalData: associatedData("s2c", frame.seq) },
          this.key,
          unb64u(frame.data),
        );
      } catch {
        throw new SignalError("DECRYPT_FAILED", "a frame did not decrypt (another ECDH info, or tampered)");
      }
      this.received = frame.seq;
      this._dispatch(JSON.parse(decoder.decode(plaintext)));
    }

    _dispatch(event) {
      if (event.event === "message") {
        if (event.offset != null) {
          if (event.offset <= (this.offsets[event.room] || 0)) return; // seen (replayed and live)
          this.offsets[event.room] = event.offset;
        }
        this.onMessage(event);
        return;
      }
      const index = this.waiting.findIndex((waiter) => waiter.matches(event));
      if (index >= 0) {
        const [waiter] = this.waiting.splice(index, 1);
        if (event.event === "error") waiter.reject(new SignalError(event.code, event.message));
        else waiter.resolve(event);
        return;
      }
      this.onEvent(event);
    }

    _fail(error) {
      this.lastError = error;
      if (this.socket) this.socket.close(1000);
    }

    send(message) {
      this.outgoing = this.outgoing.then(async () => {
        const sequence = ++this.sent;
        const data = await crypto.subtle.encrypt(
          { name: "AES-GCM", iv: nonce("c2s", sequence), additionalData: associatedData("c2s", sequence) },
          this.key,
          encoder.encode(JSON.stringify(message)),
        );
        this.socket.send(JSON.stringify({ seq: sequence, data: b64u(data) }));
      });
      return this.outgoing;
    }

    _request(message, reply) {
      const answer = new Promise((resolve, reject) => {
        this.waiting.push({ matches: (event) => event.room === message.room && (event.event === reply || event.event === "error"), resolve, reject });
      });
      return this.send(message).then(() => answer);
    }

    // Join a room; `since` (the last offset seen) replays what was missed: the reply says `recovered`.
    subscribe(room, since) {
      const message = { event: "subscribe", room };
      if (since !== undefined && since !== null) message.since = since;
      return this._request(message, "subscribed");
    }

    unsubscribe(room) {
      return this._request({ event: "unsubscribe", room }, "unsubscribed");
    }

    close() {
      if (this.socket) this.socket.close(1000);
    }
  }

  root.SignalStream = SignalStream;
  root.SignalError = SignalError;
  if (typeof module !== "undefined" && module.exports) module.exports = { SignalStream, SignalError };
})(typeof globalThis !== "undefined" ? globalThis : this);
