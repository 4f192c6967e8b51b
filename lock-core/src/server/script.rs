//! Lua scripts: their sources (in `lua/*.lua`), their SHA-1 digests, and
//! EVALSHA, falling back to EVAL (which caches the script) on `NOSCRIPT`.

use std::sync::OnceLock;

use crate::error::{AclNeed, LockError};
use crate::server::client::{NodeClient, Reply};

/// A Lua script run by digest. The digest is computed once, on first use.
///
/// A script that publishes has a second form for nodes whose releases go
/// out on sharded pub/sub ([`NodeClient::publishes_sharded`]): the same
/// source with each `PUBLISH` an `SPUBLISH`, line for line. [`Script::run`]
/// picks the form the node asks for.
#[derive(Debug)]
pub struct Script {
    name: &'static str,
    source: &'static str,
    sha1: OnceLock<String>,
    sharded: OnceLock<Sharded>,
}

/// A script's form with sharded publishes, and its digest.
#[derive(Debug)]
struct Sharded {
    source: String,
    sha1: String,
}

/// How every script publishes; the sharded form replaces exactly this.
const PUBLISH_CALL: &str = "redis.pcall('publish', ";
const SPUBLISH_CALL: &str = "redis.pcall('spublish', ";

impl Script {
    /// A script named `name` (for errors and logs) with the given source.
    pub const fn new(name: &'static str, source: &'static str) -> Self {
        Script {
            name,
            source,
            sha1: OnceLock::new(),
            sharded: OnceLock::new(),
        }
    }

    /// The source and digest to send to `node`: the sharded form if the node
    /// publishes on sharded channels and the script publishes at all.
    fn form(&self, node: &dyn NodeClient) -> (&str, &str) {
        if node.publishes_sharded() && self.source.contains(PUBLISH_CALL) {
            let sharded = self.sharded.get_or_init(|| {
                let source = sharded_source(self.source);
                let sha1 = sha1_smol::Sha1::from(&source).digest().to_string();
                Sharded { source, sha1 }
            });
            (&sharded.source, &sharded.sha1)
        } else {
            (self.source, self.sha1())
        }
    }

    /// The script's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The Lua source.
    pub fn source(&self) -> &'static str {
        self.source
    }

    /// The hex SHA-1 of the source, as Redis names it.
    pub fn sha1(&self) -> &str {
        self.sha1
            .get_or_init(|| sha1_smol::Sha1::from(self.source).digest().to_string())
    }

    /// Runs the script on `node` with EVALSHA. If the node answers `NOSCRIPT`
    /// (it restarted, failed over, or someone ran `SCRIPT FLUSH`), runs it
    /// once more with EVAL, which also caches it: one extra round trip, once
    /// per node and flush.
    ///
    /// A `WRONGTYPE` error (the first key holds another type than the script
    /// expects) becomes [`LockError::Corrupted`] naming that key, and a
    /// command of the script that the user's ACL refuses becomes
    /// [`LockError::PermissionDenied`] naming it.
    pub async fn run(
        &self,
        node: &dyn NodeClient,
        keys: &[&str],
        args: &[&[u8]],
    ) -> Result<Reply, LockError> {
        let key_count = keys.len().to_string();
        let (source, sha1) = self.form(node);
        let mut argv = evalsha_args(sha1, &key_count, keys, args);
        let result = match node.command("EVALSHA", &argv).await {
            Err(LockError::Server { message, .. }) if message.starts_with("NOSCRIPT") => {
                tracing::debug!(
                    script = self.name,
                    node = node.address(),
                    "script missing on node; sending its source"
                );
                // NOSCRIPT means nothing ran. EVAL runs the source and caches
                // it, on the node that owns the keys: in a cluster a separate
                // SCRIPT LOAD could reach another node.
                argv[0] = source.as_bytes();
                node.command("EVAL", &argv).await
            }
            other => other,
        };
        result.map_err(|err| self.explain(keys, err))
    }

    /// Runs the script like [`Script::run`] and `after` (a keyless command,
    /// `WAIT`) right behind it, as one pipeline on the connection that
    /// serves the script's first key, and returns both replies. The
    /// script's errors are mapped as in `run`; `after`'s reply is returned
    /// as it came.
    pub async fn run_then(
        &self,
        node: &dyn NodeClient,
        keys: &[&str],
        args: &[&[u8]],
        after: (&'static str, &[&[u8]]),
    ) -> Result<(Reply, Result<Reply, LockError>), LockError> {
        let key_count = keys.len().to_string();
        let (source, sha1) = self.form(node);
        let mut argv = evalsha_args(sha1, &key_count, keys, args);
        let route = keys.first().map_or(&b""[..], |key| key.as_bytes());
        let mut replies = node
            .pipeline_on_key(route, &[("EVALSHA", &argv), after])
            .await?;
        let noscript = matches!(replies.first(),
            Some(Err(LockError::Server { message, .. })) if message.starts_with("NOSCRIPT"));
        if noscript {
            // Nothing ran; send the source, as `run` does.
            argv[0] = source.as_bytes();
            replies = node
                .pipeline_on_key(route, &[("EVAL", &argv), after])
                .await?;
        }
        let mut replies = replies.into_iter();
        let (Some(script), Some(after)) = (replies.next(), replies.next()) else {
            return Err(LockError::UnexpectedReply {
                node: node.address().to_owned(),
                script: self.name,
                reply: "a pipeline without its two replies".to_owned(),
            });
        };
        let script = script.map_err(|err| self.explain(keys, err))?;
        Ok((script, after))
    }

    /// Loads the script (in the form `node` runs) into `node`'s script
    /// cache and checks the digest it reports.
    pub async fn load(&self, node: &dyn NodeClient) -> Result<(), LockError> {
        let (source, sha1) = self.form(node);
        let reply = node
            .command("SCRIPT", &[b"LOAD", source.as_bytes()])
            .await?;
        if reply.as_text() == Some(sha1) {
            Ok(())
        } else {
            Err(self.unexpected(node, &reply))
        }
    }

    /// The error for a reply this script is documented never to give.
    pub fn unexpected(&self, node: &dyn NodeClient, reply: &Reply) -> LockError {
        LockError::UnexpectedReply {
            node: node.address().to_owned(),
            script: self.name,
            reply: reply.to_string(),
        }
    }
}

/// `source` with each publish sharded: same lines, same keys and
/// arguments.
fn sharded_source(source: &str) -> String {
    source.replace(PUBLISH_CALL, SPUBLISH_CALL)
}

/// `sha1 numkeys keys... args...`, the arguments of EVALSHA (and of EVAL,
/// with the source in place of the digest).
fn evalsha_args<'a>(
    sha1: &'a str,
    key_count: &'a str,
    keys: &[&'a str],
    args: &[&'a [u8]],
) -> Vec<&'a [u8]> {
    let mut argv: Vec<&[u8]> = Vec::with_capacity(2 + keys.len() + args.len());
    argv.push(sha1.as_bytes());
    argv.push(key_count.as_bytes());
    argv.extend(keys.iter().map(|key| key.as_bytes()));
    argv.extend_from_slice(args);
    argv
}

impl Script {
    /// A script's error as the caller should see it: `WRONGTYPE` (the first
    /// key holds another type than the script expects) as
    /// [`LockError::Corrupted`] naming that key; a command the ACL refused
    /// inside the script as [`LockError::PermissionDenied`] naming the
    /// command; others unchanged.
    fn explain(&self, keys: &[&str], err: LockError) -> LockError {
        match err {
            LockError::Server { message, .. } if message.starts_with("WRONGTYPE") => {
                LockError::Corrupted {
                    key: keys.first().copied().unwrap_or_default().to_owned(),
                    detail: message,
                }
            }
            // `ERR The user executing the script can't run this command or
            // subcommand script: <sha>, on @user_script:77.` (or `access at
            // least one of the keys`, `publish to the channel`).
            LockError::Server { node, message }
                if message.contains("The user executing the script can't") =>
            {
                let needs = match AclNeed::from_message(&message) {
                    AclNeed::Unknown => self
                        .command_at(&message)
                        .map_or(AclNeed::Unknown, AclNeed::Command),
                    needs => needs,
                };
                LockError::PermissionDenied {
                    node,
                    needs,
                    message,
                }
            }
            other => other,
        }
    }

    /// The command (lower-case) that the first `redis.call` or `redis.pcall`
    /// on the line `@user_script:N` of `message` names, in this source.
    fn command_at(&self, message: &str) -> Option<String> {
        let (_, after) = message.split_once("@user_script:")?;
        let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
        let line = self
            .source
            .lines()
            .nth(digits.parse::<usize>().ok()?.checked_sub(1)?)?;
        let (_, call) = line
            .split_once("redis.call(")
            .or_else(|| line.split_once("redis.pcall("))?;
        let quoted = call.trim_start().strip_prefix(['\'', '"'])?;
        let name: String = quoted
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        (!name.is_empty()).then(|| name.to_ascii_lowercase())
    }
}

/// The single-node scripts. Each file documents its KEYS, ARGV and reply.
pub mod single {
    use super::Script;

    /// `SET NX PX` plus the next fencing token: `lua/lock/acquire.lua`, after
    /// `lua/shared/fencing_counter.lua` and `lua/shared/grant.lua`.
    pub static ACQUIRE: Script = Script::new(
        "acquire",
        concat!(
            include_str!("../../lua/shared/fencing_counter.lua"),
            include_str!("../../lua/shared/grant.lua"),
            include_str!("../../lua/lock/acquire.lua")
        ),
    );
    /// The default fenced acquire (no options) alone:
    /// `lua/lock/acquire_token.lua`.
    pub static ACQUIRE_TOKEN: Script = Script::new(
        "acquire_token",
        include_str!("../../lua/lock/acquire_token.lua"),
    );
    /// Compare-and-extend: `lua/lock/extend.lua`, after `lua/shared/renew.lua`.
    pub static EXTEND: Script = Script::new(
        "extend",
        concat!(
            include_str!("../../lua/shared/renew.lua"),
            include_str!("../../lua/lock/extend.lua")
        ),
    );
    /// Compare-and-extend of many holds in one call, for batched renewal:
    /// `lua/lock/extend_many.lua`, after `lua/shared/renew.lua`.
    pub static EXTEND_MANY: Script = Script::new(
        "extend_many",
        concat!(
            include_str!("../../lua/shared/renew.lua"),
            include_str!("../../lua/lock/extend_many.lua")
        ),
    );
    /// Compare-and-delete: `lua/lock/release.lua`, after `lua/shared/renew.lua` (for
    /// its `holds`).
    pub static RELEASE: Script = Script::new(
        "release",
        concat!(
            include_str!("../../lua/shared/renew.lua"),
            include_str!("../../lua/lock/release.lua")
        ),
    );
    /// Compare-and-replace with a new hold, for a resumed hand-off:
    /// `lua/lock/take_over.lua`.
    pub static TAKE_OVER: Script =
        Script::new("take_over", include_str!("../../lua/lock/take_over.lua"));
    /// Remaining TTL and last fencing token: `lua/lock/inspect.lua`.
    pub static INSPECT: Script = Script::new(
        "inspect",
        concat!(
            include_str!("../../lua/lock/state.lua"),
            include_str!("../../lua/lock/inspect.lua")
        ),
    );
    /// Acquire in arrival order, queueing the caller: `lua/fair/acquire.lua`.
    pub static FAIR_ACQUIRE: Script = Script::new(
        "fair_acquire",
        concat!(
            include_str!("../../lua/shared/fencing_counter.lua"),
            include_str!("../../lua/shared/grant.lua"),
            include_str!("../../lua/shared/queue.lua"),
            include_str!("../../lua/fair/acquire.lua")
        ),
    );
    /// Leave the fair queue: `lua/fair/leave.lua`.
    pub static FAIR_LEAVE: Script =
        Script::new("fair_leave", include_str!("../../lua/fair/leave.lua"));
    /// Release a fair lock and hand it to the next waiter's offer:
    /// `lua/fair/release.lua`.
    pub static FAIR_RELEASE: Script = Script::new(
        "fair_release",
        concat!(
            include_str!("../../lua/shared/renew.lua"),
            include_str!("../../lua/shared/fencing_counter.lua"),
            include_str!("../../lua/shared/queue.lua"),
            include_str!("../../lua/shared/handoff.lua"),
            include_str!("../../lua/fair/release.lua")
        ),
    );
    /// Leave a fair lock's line, giving back a grant made to the waiter's
    /// offer: `lua/fair/give_up.lua`.
    pub static FAIR_GIVE_UP: Script = Script::new(
        "fair_give_up",
        concat!(
            include_str!("../../lua/shared/renew.lua"),
            include_str!("../../lua/shared/fencing_counter.lua"),
            include_str!("../../lua/shared/queue.lua"),
            include_str!("../../lua/shared/handoff.lua"),
            include_str!("../../lua/fair/give_up.lua")
        ),
    );
}

/// Deletes a lock whoever holds it and publishes the release:
/// `lua/shared/force_release.lua`. Shared by every strategy.
pub static FORCE_RELEASE: Script = Script::new(
    "force_release",
    include_str!("../../lua/shared/force_release.lua"),
);

/// The reentrant scripts: a hash per lock, field = owner, value = hold count.
pub mod reentrant {
    use super::Script;

    /// First hold or re-entry, with the fencing token: `lua/reentrant/acquire.lua`.
    pub static ACQUIRE: Script = Script::new(
        "reentrant_acquire",
        concat!(
            include_str!("../../lua/shared/fencing_counter.lua"),
            include_str!("../../lua/shared/grant.lua"),
            include_str!("../../lua/reentrant/acquire.lua")
        ),
    );
    /// Renewal by the holder: `lua/reentrant/extend.lua`.
    pub static EXTEND: Script = Script::new(
        "reentrant_extend",
        include_str!("../../lua/reentrant/extend.lua"),
    );
    /// One hold given back: `lua/reentrant/release.lua`.
    pub static RELEASE: Script = Script::new(
        "reentrant_release",
        include_str!("../../lua/reentrant/release.lua"),
    );
    /// TTL, token and hold count: `lua/reentrant/inspect.lua`.
    pub static INSPECT: Script = Script::new(
        "reentrant_inspect",
        include_str!("../../lua/reentrant/inspect.lua"),
    );
}

/// A script of a primitive that keeps its holds in a lease set: loaded after
/// `lua/shared/queue.lua` (the line of waiters), `lua/lease_set/common.lua`
/// (the holds) and `lua/semaphore/common.lua` (what waiters of either kind
/// share), then the `helpers` (paths under `lua/`), then the files of
/// `lua/<dir>/`.
macro_rules! lease_set_script {
    ($name:literal, $dir:literal, [$($helper:literal),*], $($file:literal),+) => {
        Script::new(
            $name,
            concat!(
                include_str!("../../lua/shared/queue.lua"),
                include_str!("../../lua/lease_set/common.lua"),
                include_str!("../../lua/semaphore/common.lua"),
                $(include_str!(concat!("../../lua/", $helper, ".lua")),)*
                $(include_str!(concat!("../../lua/", $dir, "/", $file, ".lua"))),+
            ),
        )
    };
}

/// The semaphore scripts: permits with their own leases in a sorted set
/// scored by the server's clock, a stored limit, and a fencing counter per
/// slot. Each is loaded after `lua/shared/queue.lua` (the fair mode's line),
/// `lua/lease_set/common.lua` (the permits' storage, whose tallies make a
/// grant's cost independent of the live permits) and
/// `lua/semaphore/common.lua`, whose header describes the keys.
pub mod semaphore {
    use super::Script;

    macro_rules! semaphore_script {
        ($name:literal, $($file:literal),+) => {
            lease_set_script!($name, "semaphore", [], $($file),+)
        };
    }

    /// One permit of a weight, if it fits: `lua/semaphore/acquire.lua`.
    pub static ACQUIRE: Script = semaphore_script!("semaphore_acquire", "acquire");
    /// Renewal of a live permit, never of an ended one:
    /// `lua/semaphore/renew.lua`.
    pub static RENEW: Script = semaphore_script!("semaphore_renew", "renew");
    /// A permit given back, once, publishing the free weight:
    /// `lua/semaphore/release.lua`.
    pub static RELEASE: Script = semaphore_script!("semaphore_release", "release");
    /// A live permit taken over for a new id (a resumed hand-off):
    /// `lua/semaphore/take_over.lua`.
    pub static TAKE_OVER: Script = semaphore_script!("semaphore_take_over", "take_over");
    /// A fair waiter's departure, giving back a permit granted to its
    /// offer: `lua/semaphore/give_up.lua`.
    pub static GIVE_UP: Script = semaphore_script!("semaphore_give_up", "give_up");
    /// The stored limit and the live permits, read only:
    /// `lua/semaphore/inspect.lua`.
    pub static INSPECT: Script = semaphore_script!("semaphore_inspect", "state", "inspect");
    /// An explicit change of the stored limit, waking waiters:
    /// `lua/semaphore/set_limit.lua`.
    pub static SET_LIMIT: Script = semaphore_script!("semaphore_set_limit", "set_limit");
}

/// The read-write lock scripts: shared and exclusive holds with their own
/// leases in a sorted set scored by the server's clock, a write counter, and
/// the fair lock's queue keys for the waiting writers. Each is a lease set's
/// script, loaded with the grant helpers (`lua/shared/fencing_counter.lua`,
/// `lua/shared/grant.lua`: write tokens are issued as a lock's are) and
/// `lua/rw/common.lua` (whose header describes the keys).
pub mod rw {
    use super::Script;

    macro_rules! rw_script {
        ($name:literal, $($file:literal),+) => {
            lease_set_script!(
                $name,
                "rw",
                ["shared/fencing_counter", "shared/grant", "rw/common"],
                $($file),+
            )
        };
    }

    /// A shared or exclusive hold, when nothing is in its way:
    /// `lua/rw/acquire.lua`.
    pub static ACQUIRE: Script = rw_script!("rw_acquire", "acquire");
    /// Renewal of a live hold, never of an ended one: `lua/rw/renew.lua`.
    pub static RENEW: Script = rw_script!("rw_renew", "renew");
    /// A hold given back, once, waking who it may let in:
    /// `lua/rw/release.lua`.
    pub static RELEASE: Script = rw_script!("rw_release", "release");
    /// A live hold taken over for a new id (a resumed hand-off):
    /// `lua/rw/take_over.lua`.
    pub static TAKE_OVER: Script = rw_script!("rw_take_over", "take_over");
    /// A waiting writer's departure, giving back a write granted to its
    /// offer: `lua/rw/give_up.lua`.
    pub static GIVE_UP: Script = rw_script!("rw_give_up", "give_up");
    /// The epoch, the waiting writers and the live holds, read only:
    /// `lua/rw/inspect.lua`.
    pub static INSPECT: Script = rw_script!("rw_inspect", "state", "inspect");
}

/// The multi-key scripts: several lock keys taken, renewed and released as
/// one hold, each key stored as a single-node lock's (`<owner>:<nonce>#<token>`)
/// with one token for all.
pub mod multi {
    use super::Script;

    /// Every member, or none, with one token above each member's counter:
    /// `lua/multi/acquire.lua`.
    pub static ACQUIRE: Script = Script::new(
        "multi_acquire",
        concat!(
            include_str!("../../lua/shared/fencing_counter.lua"),
            include_str!("../../lua/multi/acquire.lua")
        ),
    );
    /// The members of one slot raised to a greater token (a hold taken slot
    /// by slot on a cluster): `lua/multi/raise.lua`.
    pub static RAISE: Script = Script::new(
        "multi_raise",
        concat!(
            include_str!("../../lua/shared/fencing_counter.lua"),
            include_str!("../../lua/multi/raise.lua")
        ),
    );
    /// Whether a slot's members are held by someone else, read only (what
    /// a hold taken slot by slot asks every slot first):
    /// `lua/multi/probe.lua`.
    pub static PROBE: Script =
        Script::new("multi_probe", include_str!("../../lua/multi/probe.lua"));
    /// Every member set on one node, or none, without a token (each Redlock
    /// node's grant): `lua/multi/set.lua`.
    pub static SET_ALL: Script = Script::new("multi_set", include_str!("../../lua/multi/set.lua"));
    /// Every member renewed, or none: `lua/multi/renew.lua`.
    pub static RENEW: Script = Script::new(
        "multi_renew",
        concat!(
            include_str!("../../lua/shared/renew.lua"),
            include_str!("../../lua/multi/renew.lua")
        ),
    );
    /// Every member the hold still has, deleted and published:
    /// `lua/multi/release.lua`.
    pub static RELEASE: Script = Script::new(
        "multi_release",
        concat!(
            include_str!("../../lua/shared/renew.lua"),
            include_str!("../../lua/multi/release.lua")
        ),
    );
}

/// The election scripts, over a single-node lock whose fencing token is
/// the leader's term: the proclamation bound to that term, and the read of
/// the leader.
pub mod election {
    use super::Script;

    /// A leader's value, bound to its term: `lua/election/proclaim.lua`.
    pub static PROCLAIM: Script = Script::new(
        "election_proclaim",
        concat!(
            include_str!("../../lua/shared/renew.lua"),
            include_str!("../../lua/election/state.lua"),
            include_str!("../../lua/election/proclaim.lua")
        ),
    );
    /// The leader's term and value, read only: `lua/election/leader.lua`.
    pub static LEADER: Script = Script::new(
        "election_leader",
        concat!(
            include_str!("../../lua/election/state.lua"),
            include_str!("../../lua/election/leader.lua")
        ),
    );
}

/// The barrier scripts: its parties, holds of the name's lease set, and
/// its round (`lua/barrier/`, after `shared/queue.lua`,
/// `lease_set/common.lua` and `barrier/state.lua`).
pub mod barrier {
    use super::Script;

    macro_rules! barrier_script {
        ($name:literal, $file:literal) => {
            Script::new(
                $name,
                concat!(
                    include_str!("../../lua/shared/queue.lua"),
                    include_str!("../../lua/lease_set/common.lua"),
                    include_str!("../../lua/barrier/state.lua"),
                    include_str!(concat!("../../lua/barrier/", $file, ".lua"))
                ),
            )
        };
    }

    /// A party's entry, which opens the round when it makes the count:
    /// `lua/barrier/enter.lua`.
    pub static ENTER: Script = barrier_script!("barrier_enter", "enter");
    /// A party's renewal: `lua/barrier/renew.lua`.
    pub static RENEW: Script = barrier_script!("barrier_renew", "renew");
    /// A party's leave: `lua/barrier/leave.lua`.
    pub static LEAVE: Script = barrier_script!("barrier_leave", "leave");
    /// The barrier's state, read only: `lua/barrier/read.lua`.
    pub static READ: Script = barrier_script!("barrier_read", "read");
}

/// The latch scripts: a count set once, counted down once per id, and
/// read (`lua/latch/`, after `latch/state.lua`).
pub mod latch {
    use super::Script;

    macro_rules! latch_script {
        ($name:literal, $file:literal) => {
            Script::new(
                $name,
                concat!(
                    include_str!("../../lua/latch/state.lua"),
                    include_str!(concat!("../../lua/latch/", $file, ".lua"))
                ),
            )
        };
    }

    /// A latch's count, set once: `lua/latch/set.lua`.
    pub static SET: Script = latch_script!("latch_set", "set");
    /// One count down, once per id: `lua/latch/count_down.lua`.
    pub static COUNT_DOWN: Script = latch_script!("latch_count_down", "count_down");
    /// The count, read only: `lua/latch/read.lua`.
    pub static READ: Script = latch_script!("latch_read", "read");
    /// The latch deleted, and only a latch: `lua/latch/delete.lua`.
    pub static DELETE: Script = latch_script!("latch_delete", "delete");
}

/// The script that reads a whole name: what holds it, whichever primitive
/// that is, in one round trip.
pub mod name {
    use super::Script;

    /// A lock's (or an election's), a semaphore's, a read-write lock's, a
    /// latch's or a barrier's state, by the type of the name's main key: `lua/name/inspect.lua`,
    /// after each primitive's state function and its helpers.
    pub static INSPECT: Script = Script::new(
        "name_inspect",
        concat!(
            include_str!("../../lua/shared/queue.lua"),
            include_str!("../../lua/lease_set/common.lua"),
            include_str!("../../lua/semaphore/common.lua"),
            include_str!("../../lua/shared/fencing_counter.lua"),
            include_str!("../../lua/shared/grant.lua"),
            include_str!("../../lua/rw/common.lua"),
            include_str!("../../lua/lock/state.lua"),
            include_str!("../../lua/semaphore/state.lua"),
            include_str!("../../lua/rw/state.lua"),
            include_str!("../../lua/election/state.lua"),
            include_str!("../../lua/latch/state.lua"),
            include_str!("../../lua/barrier/state.lua"),
            include_str!("../../lua/name/inspect.lua")
        ),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_publish_has_a_sharded_form() {
        // The sharded form replaces one spelling: a publish written any
        // other way would stay classic and reach no sharded subscriber.
        let lua = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("lua");
        let mut publishing = 0;
        let mut scripts = 0;
        // A folder per primitive, each of scripts.
        let folders = std::fs::read_dir(&lua).expect("the lua folder");
        let files = folders.flat_map(|folder| {
            let folder = folder.expect("a lua folder").path();
            std::fs::read_dir(&folder).expect("a primitive's folder")
        });
        for entry in files {
            let path = entry.expect("a lua file").path();
            let source = std::fs::read_to_string(&path).expect("a readable script");
            scripts += 1;
            for (number, line) in source.lines().enumerate() {
                let code = line.split("--").next().unwrap_or("");
                if code.to_ascii_lowercase().contains("publish") {
                    assert!(
                        code.contains(PUBLISH_CALL),
                        "{}:{}: publish as `{PUBLISH_CALL}...`",
                        path.display(),
                        number + 1
                    );
                    publishing += 1;
                }
            }
        }
        assert!(scripts >= 44, "found {scripts} scripts");
        assert!(publishing >= 10, "found {publishing} publishes");
        let release = single::RELEASE.source();
        let sharded = sharded_source(release);
        assert_eq!(sharded.lines().count(), release.lines().count());
        assert!(sharded.contains(SPUBLISH_CALL));
        assert!(!sharded.contains("'publish'"));
    }

    #[test]
    fn digest_matches_redis_sha1_of_the_source() {
        let script = Script::new("t", "return 1");
        // `redis-cli SCRIPT LOAD "return 1"` answers this digest.
        assert_eq!(script.sha1(), "e0e1f9fabfc9d4800c877a703b823ac0578ff8db");
    }

    #[test]
    fn a_refused_script_command_is_named_from_its_line() {
        let refused = |line: usize| LockError::Server {
            node: "127.0.0.1:6379".to_owned(),
            message: format!(
                "ERR The user executing the script can't run this command or subcommand \
                 script: {}, on @user_script:{line}.",
                single::ACQUIRE.sha1()
            ),
        };
        // Line 56 of shared/grant.lua, after the 21 lines of shared/fencing_counter.lua.
        let time_line = single::ACQUIRE
            .source()
            .lines()
            .position(|line| line.contains("grant_time = redis.call('time')"))
            .expect("the acquire script reads TIME")
            + 1;
        match single::ACQUIRE.explain(&["k"], refused(time_line)) {
            LockError::PermissionDenied { needs, node, .. } => {
                assert_eq!(needs, AclNeed::Command("time".to_owned()));
                assert_eq!(node, "127.0.0.1:6379");
            }
            other => panic!("not a permission error: {other:?}"),
        }
        // A line without a call (a comment, or past the end): said, not guessed.
        for line in [1, 100_000] {
            match single::ACQUIRE.explain(&["k"], refused(line)) {
                LockError::PermissionDenied { needs, .. } => assert_eq!(needs, AclNeed::Unknown),
                other => panic!("not a permission error: {other:?}"),
            }
        }
    }

    #[test]
    fn noperm_messages_name_what_the_acl_lacks() {
        for (message, needs) in [
            (
                "NOPERM this user has no permissions to run the 'time' command",
                AclNeed::Command("time".to_owned()),
            ),
            (
                "NOPERM User locker has no permissions to run the 'cluster|slots' command",
                AclNeed::Command("cluster|slots".to_owned()),
            ),
            (
                "NOPERM this user has no permissions to access one of the keys used as arguments",
                AclNeed::Keys,
            ),
            (
                "NOPERM this user has no permissions to access one of the channels used as arguments",
                AclNeed::Channels,
            ),
            ("NOPERM No permissions to access a key", AclNeed::Keys),
            ("NOPERM No permissions to access a channel", AclNeed::Channels),
            (
                "ERR The user executing the script can't access at least one of the keys \
                 mentioned in the command script: 1e88, on @user_script:9.",
                AclNeed::Keys,
            ),
            ("NOPERM something new", AclNeed::Unknown),
        ] {
            assert_eq!(AclNeed::from_message(message), needs, "{message}");
        }
    }

    #[test]
    fn every_script_documents_keys_argv_and_reply() {
        // The files, not the loaded sources: the acquire scripts are loaded
        // after `shared/fencing_counter.lua`, whose header is about its function.
        for (name, source) in [
            ("acquire", include_str!("../../lua/lock/acquire.lua")),
            (
                "acquire_token",
                include_str!("../../lua/lock/acquire_token.lua"),
            ),
            ("extend", include_str!("../../lua/lock/extend.lua")),
            ("release", include_str!("../../lua/lock/release.lua")),
            ("inspect", include_str!("../../lua/lock/inspect.lua")),
            (
                "reentrant_acquire",
                include_str!("../../lua/reentrant/acquire.lua"),
            ),
            (
                "reentrant_extend",
                include_str!("../../lua/reentrant/extend.lua"),
            ),
            (
                "reentrant_release",
                include_str!("../../lua/reentrant/release.lua"),
            ),
            (
                "reentrant_inspect",
                include_str!("../../lua/reentrant/inspect.lua"),
            ),
            (
                "force_release",
                include_str!("../../lua/shared/force_release.lua"),
            ),
            ("fair_acquire", include_str!("../../lua/fair/acquire.lua")),
            ("fair_leave", include_str!("../../lua/fair/leave.lua")),
            ("fair_release", include_str!("../../lua/fair/release.lua")),
            ("fair_give_up", include_str!("../../lua/fair/give_up.lua")),
            (
                "semaphore_acquire",
                include_str!("../../lua/semaphore/acquire.lua"),
            ),
            (
                "semaphore_renew",
                include_str!("../../lua/semaphore/renew.lua"),
            ),
            (
                "semaphore_release",
                include_str!("../../lua/semaphore/release.lua"),
            ),
            (
                "semaphore_inspect",
                include_str!("../../lua/semaphore/inspect.lua"),
            ),
            (
                "semaphore_take_over",
                include_str!("../../lua/semaphore/take_over.lua"),
            ),
            (
                "semaphore_set_limit",
                include_str!("../../lua/semaphore/set_limit.lua"),
            ),
            ("rw_acquire", include_str!("../../lua/rw/acquire.lua")),
            ("rw_renew", include_str!("../../lua/rw/renew.lua")),
            ("rw_release", include_str!("../../lua/rw/release.lua")),
            ("rw_take_over", include_str!("../../lua/rw/take_over.lua")),
            ("rw_inspect", include_str!("../../lua/rw/inspect.lua")),
            ("rw_give_up", include_str!("../../lua/rw/give_up.lua")),
            (
                "semaphore_give_up",
                include_str!("../../lua/semaphore/give_up.lua"),
            ),
            ("multi_acquire", include_str!("../../lua/multi/acquire.lua")),
            ("multi_renew", include_str!("../../lua/multi/renew.lua")),
            ("multi_release", include_str!("../../lua/multi/release.lua")),
            ("multi_set", include_str!("../../lua/multi/set.lua")),
            ("multi_raise", include_str!("../../lua/multi/raise.lua")),
            ("multi_probe", include_str!("../../lua/multi/probe.lua")),
            (
                "election_proclaim",
                include_str!("../../lua/election/proclaim.lua"),
            ),
            (
                "election_leader",
                include_str!("../../lua/election/leader.lua"),
            ),
            ("name_inspect", include_str!("../../lua/name/inspect.lua")),
            ("latch_set", include_str!("../../lua/latch/set.lua")),
            (
                "latch_count_down",
                include_str!("../../lua/latch/count_down.lua"),
            ),
            ("latch_read", include_str!("../../lua/latch/read.lua")),
            ("latch_delete", include_str!("../../lua/latch/delete.lua")),
            ("barrier_enter", include_str!("../../lua/barrier/enter.lua")),
            ("barrier_renew", include_str!("../../lua/barrier/renew.lua")),
            ("barrier_leave", include_str!("../../lua/barrier/leave.lua")),
            ("barrier_read", include_str!("../../lua/barrier/read.lua")),
        ] {
            let header = source
                .lines()
                .take_while(|line| line.starts_with("--"))
                .collect::<Vec<_>>()
                .join("\n");
            assert!(header.contains("KEYS[1]"), "{name} lacks KEYS docs");
            assert!(header.contains("Reply"), "{name} lacks reply docs");
        }
        let counter = include_str!("../../lua/shared/fencing_counter.lua");
        assert!(counter.starts_with("--") && counter.contains("counter_problem(counter)"));
        let grant = include_str!("../../lua/shared/grant.lua");
        assert!(grant.starts_with("--") && grant.contains("next_token(fence, counter"));
        let prelude = format!("{counter}{grant}");
        for script in [&single::ACQUIRE, &single::FAIR_ACQUIRE, &reentrant::ACQUIRE] {
            assert!(
                script.source().starts_with(&prelude),
                "{} is loaded after the counter check and the grant helpers",
                script.name()
            );
        }
    }
}
