"""Signal: the encrypted WebSocket /stream (docs/services/signal.md)."""

from settings.env import IS_PRODUCTION, env

# HKDF's `info` of the /stream key derivation (spec 5): identical on every signal replica and in
# every client. Not a secret (browser clients hold it): a label binding the keys to this protocol.
APP_ENV_WEBSOCKET_ECDH_INFO = env.str("APP_ENV_WEBSOCKET_ECDH_INFO", default="merchant-platform/signal/stream/v1")
# Browser origins allowed to open /stream (Channels' advice against cross-site WebSocket hijacking).
# A handshake without an Origin header (not a browser) is allowed; one from another origin is refused.
SIGNAL_ALLOWED_ORIGINS = env.list(
    "SIGNAL_ALLOWED_ORIGINS", default=[] if IS_PRODUCTION else ["http://127.0.0.1:8000", "http://localhost:8000"]
)
# Seconds a new socket may take to complete the handshake before it is closed (4408).
SIGNAL_HANDSHAKE_TIMEOUT_SECONDS = env.float("SIGNAL_HANDSHAKE_TIMEOUT_SECONDS", default=10.0)
# Largest frame a client may send (bytes); a larger one closes the socket (4413).
SIGNAL_MAX_FRAME_BYTES = env.int("SIGNAL_MAX_FRAME_BYTES", default=64 * 1024)
# Rooms one socket may be subscribed to at once.
SIGNAL_MAX_ROOMS_PER_CONNECTION = env.int("SIGNAL_MAX_ROOMS_PER_CONNECTION", default=100)
# Recent messages each room keeps in Redis for clients that reconnect (0 disables), and how long a
# room's history outlives its last message.
SIGNAL_HISTORY_SIZE = env.int("SIGNAL_HISTORY_SIZE", default=100)
SIGNAL_HISTORY_TTL_SECONDS = env.int("SIGNAL_HISTORY_TTL_SECONDS", default=3600)
# How often a socket re-checks the rooms it joined against the policies, leaving the ones a revoked
# grant or membership no longer allows (docs/services/signal.md, Rooms).
SIGNAL_ROOM_RECHECK_SECONDS = env.float("SIGNAL_ROOM_RECHECK_SECONDS", default=2.0)
