//! Building blocks for writing a locking strategy.
//!
//! Applications need none of this: they use a built-in strategy through
//! [`LockManager`](crate::LockManager). This module is for authors of a new
//! strategy, a type that implements [`LockBackend`](crate::LockBackend) and so
//! gets waiting, retries, the watchdog, guards and loss signals from the
//! manager for free. The built-in strategies (`lock-redis-single`,
//! `lock-reentrant`, `lock-redlock`) are written with exactly these items.
//!
//! # Writing a strategy
//!
//! 1. **Implement [`LockBackend`](crate::LockBackend) over a [`ScriptedNode`]**
//!    (one Redis deployment: a standalone server, a cluster or a sentinel
//!    group), or over several connections for a strategy that spans
//!    independent nodes: open each with [`connect`] and keep it as an
//!    `Arc<dyn `[`NodeClient`]`>`. Each method makes one attempt and keeps the
//!    trait's `# Contract`; `lock-testkit`'s contract suite checks it.
//! 2. **Do each step in one Lua [`Script`]**, so that compare-and-set is
//!    atomic on the server. Declare scripts as `static`s
//!    (`Script::new(name, include_str!(..))`) and run them with
//!    [`ScriptedNode::run`] (or [`Script::run`] on a [`NodeClient`]): EVALSHA,
//!    falling back to EVAL once when the node lost its script cache. A
//!    strategy that keeps the built-in key layout can reuse the built-in
//!    strategies' scripts from [`scripts`].
//! 3. **Check every reply.** Match the exact shape the script documents and
//!    turn anything else into an error with [`ScriptedNode::unexpected`] (or
//!    [`Script::unexpected`]), which is
//!    [`LockError::UnexpectedReply`](crate::LockError::UnexpectedReply). Never
//!    guess what an odd reply meant.
//! 4. **Compute deadlines with the timing helpers**, which saturate instead of
//!    overflowing: [`validate_ttl`] before sending a TTL, [`MillisText`] (or
//!    [`ttl_millis`]) to send it (`PX`, `PEXPIRE`), [`remaining_from_pttl`]
//!    to read a `PTTL`. A strategy that waits for several nodes trusts a
//!    lease only for [`validity`]`(ttl, elapsed, `[`clock_drift`]`(ttl, factor))`, where
//!    `elapsed` is counted from the moment the first request was *sent*.
//! 5. **Hand waiters a [`ReleaseWatch`]** (boxed as
//!    [`Wakeups`](crate::Wakeups)) from
//!    [`LockBackend::watch_releases`](crate::LockBackend::watch_releases), so
//!    they sleep until a release is published instead of polling:
//!    [`ScriptedNode::watch_releases`] does it for one deployment; over several
//!    nodes, keep a [`ReleaseNotifier`] per node and
//!    [`merge`](ReleaseWatch::merge) their watches. Release scripts publish on
//!    [`KeyNames::release_channel`].
//! 6. **Declare what you have** in
//!    [`LockBackend::capabilities`](crate::LockBackend::capabilities): a
//!    claim other than the plain lock reaches your
//!    [`try_acquire`](crate::LockBackend::try_acquire) only when you declare
//!    its capability, and a primitive's own operations are traits you opt
//!    into ([`SemaphoreBackend`](crate::SemaphoreBackend), ...). Name the
//!    nodes that hold your keys in a [`ListBackend`](crate::ListBackend)
//!    through [`list_held`], so `distlock list` can list your locks.
//!
//! # Example
//!
//! A strategy without fencing tokens: its own acquire script writes the
//! built-in single-node layout (a string key holding
//! [`HoldToken::value`](crate::HoldToken::value)), so it reuses the built-in
//! scripts to renew, release and inspect.
//!
//! ```no_run
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! use lock_core::strategy::{
//!     remaining_from_pttl, scripts, validate_ttl, MillisText, Reply, Script, ScriptedNode,
//! };
//! use lock_core::{
//!     async_trait, AcquireOutcome, Acquired, Capabilities, Claim, ClientKind, ConnectOptions,
//!     ExtendOutcome, HoldToken, LockBackend, LockConfig, LockError, LockKey, LockManager,
//!     LockState, NameState, NodeUrl, ReleaseOutcome, Wakeups,
//! };
//!
//! /// `SET NX PX`, or the holder's remaining TTL.
//! static ACQUIRE: Script = Script::new(
//!     "plain_acquire",
//!     r#"
//! -- KEYS[1]  the lock key
//! -- ARGV[1]  the hold's value
//! -- ARGV[2]  the TTL in milliseconds
//! --
//! -- Reply: {1} when taken, {0, pttl} when held by someone else.
//! if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
//!   return {1}
//! end
//! return {0, redis.call('pttl', KEYS[1])}
//! "#,
//! );
//!
//! #[derive(Debug)]
//! struct PlainBackend {
//!     node: ScriptedNode,
//! }
//!
//! #[async_trait]
//! impl LockBackend for PlainBackend {
//!     fn strategy(&self) -> &'static str {
//!         "plain"
//!     }
//!
//!     /// It stores its hold's value alone, so a release of an attempt
//!     /// whose reply was lost frees only what that attempt took.
//!     fn capabilities(&self) -> Capabilities<'_> {
//!         Capabilities::unknown().releasing_only_its_attempt()
//!     }
//!
//!     /// The plain lock: the engine sends no other claim to a backend that
//!     /// declares no other capability.
//!     async fn try_acquire(
//!         &self,
//!         key: &LockKey,
//!         hold: &HoldToken,
//!         ttl: Duration,
//!         _claim: &Claim,
//!         _earlier: Option<&HoldToken>,
//!     ) -> Result<AcquireOutcome, LockError> {
//!         validate_ttl(ttl)?;
//!         let ttl_ms = MillisText::of_ttl(ttl);
//!         let args = [hold.value().as_bytes(), ttl_ms.as_bytes()];
//!         let reply = self.node.run(&ACQUIRE, &[key.redis_key()], &args).await?;
//!         match reply.as_array() {
//!             Some([Reply::Int(1)]) => Ok(Acquired::new(None, ttl).into()),
//!             Some([Reply::Int(0), Reply::Int(pttl)]) => Ok(AcquireOutcome::Held {
//!                 remaining: remaining_from_pttl(*pttl),
//!             }),
//!             _ => Err(self.node.unexpected(&ACQUIRE, &reply)),
//!         }
//!     }
//!
//!     async fn extend(
//!         &self,
//!         key: &LockKey,
//!         hold: &HoldToken,
//!         ttl: Duration,
//!     ) -> Result<ExtendOutcome, LockError> {
//!         validate_ttl(ttl)?;
//!         let ttl_ms = MillisText::of_ttl(ttl);
//!         let args = [hold.value().as_bytes(), ttl_ms.as_bytes()];
//!         let extend = &scripts::single::EXTEND;
//!         match self.node.run(extend, &[key.redis_key()], &args).await? {
//!             Reply::Int(1) => Ok(ExtendOutcome::Extended { ttl }),
//!             Reply::Int(0) => Ok(ExtendOutcome::NotHeld),
//!             other => Err(self.node.unexpected(extend, &other)),
//!         }
//!     }
//!
//!     async fn release(&self, key: &LockKey, hold: &HoldToken) -> Result<ReleaseOutcome, LockError> {
//!         let release = &scripts::single::RELEASE;
//!         let args = [hold.value().as_bytes()];
//!         match self.node.run(release, &[key.redis_key()], &args).await? {
//!             Reply::Int(1) => Ok(ReleaseOutcome::Released),
//!             Reply::Int(0) => Ok(ReleaseOutcome::NotHeld),
//!             other => Err(self.node.unexpected(release, &other)),
//!         }
//!     }
//!
//!     // Only locks hold this strategy's names.
//!     async fn inspect(&self, key: &LockKey) -> Result<NameState, LockError> {
//!         let inspect = &scripts::single::INSPECT;
//!         let reply = self.node.run(inspect, &[key.redis_key(), key.fence_key()], &[]).await?;
//!         match reply.as_array() {
//!             Some([Reply::Int(-2), _, _]) => Ok(NameState::Free { last_token: None }),
//!             Some([Reply::Int(pttl), _, _]) => Ok(NameState::Lock(LockState::Held {
//!                 remaining: remaining_from_pttl(*pttl),
//!                 token: None,
//!                 hold_count: None,
//!                 holder: None,
//!             })),
//!             _ => Err(self.node.unexpected(inspect, &reply)),
//!         }
//!     }
//!
//!     async fn force_release(&self, key: &LockKey) -> Result<usize, LockError> {
//!         self.node.force_release(key).await
//!     }
//!
//!     async fn watch_releases(&self, key: &LockKey) -> Result<Option<Box<dyn Wakeups>>, LockError> {
//!         Ok(self.node.watch_releases(key).await?.map(|watch| Box::new(watch) as _))
//!     }
//! }
//!
//! # async fn demo() -> Result<(), LockError> {
//! let url = NodeUrl::new("redis://127.0.0.1:6379");
//! let node = ScriptedNode::connect(ClientKind::default(), url, ConnectOptions::default()).await?;
//! let locks = LockManager::new(Arc::new(PlainBackend { node }), LockConfig::default())?;
//! let guard = locks.acquire("report").await?;
//! guard.release().await?;
//! # Ok(())
//! # }
//! ```

pub use crate::engine::lease::timing::{clock_drift, validity};
pub use crate::server::client::{connect, NodeClient, Reply};
pub use crate::server::keys::KeyNames;
pub use crate::server::list::list_held;
pub use crate::server::millis::{remaining_from_pttl, MillisText};
pub use crate::server::notify::{ReleaseNotifier, ReleaseWatch};
pub use crate::server::script::Script;
pub use crate::server::scripted::ScriptedNode;
pub use crate::ttl::{ttl_millis, validate_ttl};

pub mod scripts {
    //! The Lua scripts of the built-in strategies.
    //!
    //! A strategy that stores its locks in the same key layout can reuse them:
    //! [`single`] for a string key holding
    //! [`HoldToken::value`](crate::HoldToken::value) with its fencing counter
    //! beside it (`lock-redis-single`, and each node of `lock-redlock`),
    //! [`reentrant`] for a hash of owner to hold count (`lock-reentrant`),
    //! [`semaphore`] for permits with leases of their own, [`rw`] for a
    //! read-write lock's shared and exclusive holds, [`multi`] for several
    //! lock keys held as one, [`election`] for
    //! a leader's value bound to its term, [`latch`] for a count-down
    //! latch, [`barrier`] for a double barrier's parties, [`name`] for what
    //! holds a name
    //! whichever primitive it is, and
    //! [`FORCE_RELEASE`] for any layout. Each script's source documents its
    //! `KEYS`, `ARGV` and reply; read it with
    //! [`Script::source`](super::Script::source).

    pub use crate::server::script::{
        barrier, election, latch, multi, name, reentrant, rw, semaphore, single, FORCE_RELEASE,
    };
}
