//! The Redis layer: client adapters (the only code that names the `redis`
//! and `fred` crates), TLS, endpoints and URLs, the Lua scripts, the scripted
//! node every strategy talks through, release notifications, holder
//! information and listing.
//!
//! It implements what the [`engine`](crate::engine) asks of a backend and may
//! use the engine's types; the engine never uses this layer's.

pub(crate) mod client;
pub(crate) mod grant;
pub(crate) mod keys;
pub(crate) mod list;
pub(crate) mod millis;
pub(crate) mod notify;
pub(crate) mod script;
pub(crate) mod scripted;
pub(crate) mod topology;
pub(crate) mod url;
