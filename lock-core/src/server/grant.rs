//! What a grant writes beside the lock key: how long the fencing counter
//! lives after it, and who took the lock (holder information).

use std::time::{Duration, SystemTime};

use crate::engine::backend::Capabilities;
use crate::engine::state::HolderInfo;
use crate::error::LockError;
use crate::server::client::Reply;
use crate::ttl::ttl_millis;

/// The longest `holder_label`, in bytes.
pub const MAX_HOLDER_LABEL_LEN: usize = 128;

/// The longest host name stored; longer ones are cut (at a character
/// boundary). Linux allows 64 bytes, DNS names 253.
const MAX_HOST_LEN: usize = 255;

/// What the built-in acquire scripts write beside the lock key, from
/// [`LockConfig::fencing`](crate::LockConfig::fencing), [`LockConfig::fencing_counter_ttl`](crate::LockConfig::fencing_counter_ttl),
/// [`LockConfig::holder_info`](crate::LockConfig::holder_info) and [`LockConfig::holder_label`](crate::LockConfig::holder_label). The default
/// writes what they always did: a fencing token from a counter that never
/// expires, and no holder information.
///
/// A strategy built from a config gets these from
/// [`GrantOptions::from_config`]; one built by hand takes them through its
/// `with_grant_options`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GrantOptions {
    /// How long the fencing counter lives after a grant; `None`: forever.
    pub fencing_counter_ttl: Option<Duration>,
    /// Whether single-node grants outside fair mode issue a fencing token
    /// ([`LockConfig::fencing`](crate::LockConfig::fencing)).
    fencing: bool,
    /// Who this process is, stored by each grant; `None`: nothing is stored.
    holder: Option<HolderIdentity>,
}

impl Default for GrantOptions {
    fn default() -> Self {
        GrantOptions {
            fencing_counter_ttl: None,
            fencing: true,
            holder: None,
        }
    }
}

/// This process as holder information names it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct HolderIdentity {
    host: String,
    pid: u32,
    label: Option<String>,
}

impl GrantOptions {
    /// These options with fencing tokens issued (`true`, the default) or
    /// not by single-node grants outside fair mode; see
    /// [`LockConfig::fencing`](crate::LockConfig::fencing) for what is lost without them. The fair-mode
    /// and reentrant scripts issue tokens either way.
    pub fn with_fencing(mut self, fencing: bool) -> Self {
        self.fencing = fencing;
        self
    }

    /// Whether single-node grants outside fair mode issue fencing tokens.
    pub fn fencing(&self) -> bool {
        self.fencing
    }

    /// These options with a fencing counter that expires `ttl` after the
    /// last grant (at least 1 ms), or never with `None`.
    pub fn with_fencing_counter_ttl(mut self, ttl: Option<Duration>) -> Self {
        self.fencing_counter_ttl = ttl;
        self
    }

    /// These options with holder information: each grant stores this
    /// process's host name and id, the server's time and `label`. Errors
    /// with [`LockError::InvalidConfig`] on `holder_label` for a label that
    /// is empty, longer than [`MAX_HOLDER_LABEL_LEN`] bytes, or holds control
    /// characters.
    pub fn with_holder_info(mut self, label: Option<String>) -> Result<Self, LockError> {
        if let Some(label) = &label {
            validate_holder_label(label)?;
        }
        self.holder = Some(HolderIdentity {
            host: host_name(),
            pid: std::process::id(),
            label,
        });
        Ok(self)
    }

    /// Whether grants store holder information.
    pub fn holder_info(&self) -> bool {
        self.holder.is_some()
    }

    /// Whether a grant writes the lock key and a fencing token and nothing
    /// else: fencing on, a counter that never expires, no holder
    /// information (the defaults). Such a grant needs no script.
    pub fn token_only(&self) -> bool {
        self.fencing && self.fencing_counter_ttl.is_none() && self.holder.is_none()
    }

    /// Whether a grant with these options writes nothing but the lock key
    /// and its counter's `INCR`, fencing on or off: what a release can
    /// grant a fair lock's next waiter on the server (a fair grant issues a
    /// token whatever `fencing` says).
    pub fn counter_only(&self) -> bool {
        self.fencing_counter_ttl.is_none() && self.holder.is_none()
    }

    /// What a backend that grants with these options does with the
    /// config's `fencing` and `holder_info` (see
    /// [`LockBackend::capabilities`](crate::LockBackend::capabilities)).
    pub fn capabilities(&self) -> Capabilities<'static> {
        Capabilities::unknown()
            .with_fencing(self.fencing)
            .with_holder_info(self.holder_info())
    }

    /// The five ARGV the built-in acquire scripts take after their own (see
    /// `lua/shared/grant.lua`): the counter's TTL in milliseconds (`0` for none),
    /// `1` to store holder information (else `0`), the host name, the
    /// process id and the label (`""` for none).
    pub fn script_args(&self) -> [String; 5] {
        let counter_ttl = self
            .fencing_counter_ttl
            .map_or(0, |ttl| ttl_millis(ttl).max(1));
        match &self.holder {
            None => [
                counter_ttl.to_string(),
                "0".to_owned(),
                String::new(),
                String::new(),
                String::new(),
            ],
            Some(holder) => [
                counter_ttl.to_string(),
                "1".to_owned(),
                holder.host.clone(),
                holder.pid.to_string(),
                holder.label.clone().unwrap_or_default(),
            ],
        }
    }
}

/// Checks a `holder_label`: not empty, at most [`MAX_HOLDER_LABEL_LEN`]
/// bytes, no control characters (it is printed in a terminal by `distlock
/// status` and `list`).
pub(crate) fn validate_holder_label(label: &str) -> Result<(), LockError> {
    let reason = if label.is_empty() {
        "is empty; leave it out for no label".to_owned()
    } else if label.len() > MAX_HOLDER_LABEL_LEN {
        format!(
            "is {} bytes long; the maximum is {MAX_HOLDER_LABEL_LEN}",
            label.len()
        )
    } else if label.chars().any(char::is_control) {
        "holds a control character (a newline, a tab, an escape); use printable text".to_owned()
    } else {
        return Ok(());
    };
    Err(LockError::config("holder_label", reason))
}

/// This machine's host name: the kernel's on Linux (`/proc`, no call into
/// libc), else `$HOSTNAME` or `$COMPUTERNAME`, else `unknown`. Control
/// characters are replaced and the length bounded, since it is printed.
fn host_name() -> String {
    let found = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .or_else(|| std::env::var("COMPUTERNAME").ok())
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "unknown".to_owned());
    let mut host = String::with_capacity(found.len().min(MAX_HOST_LEN));
    for c in found.chars() {
        if host.len() + c.len_utf8() > MAX_HOST_LEN {
            break;
        }
        host.push(if c.is_control() { '?' } else { c });
    }
    host
}

impl HolderInfo {
    /// The holder information in an inspect script's reply: the fields of
    /// its holder hash as `field, value, ...` (`lua/lock/inspect.lua`). `Ok(None)`
    /// for none (an empty array); `Err` for a reply of another shape, or a
    /// hash without a host, a process id or a time.
    pub fn from_reply(reply: &Reply) -> Result<Option<HolderInfo>, String> {
        let items = reply
            .as_array()
            .ok_or_else(|| format!("holder information that is not an array: {reply}"))?;
        if items.is_empty() {
            return Ok(None);
        }
        if items.len() % 2 != 0 {
            return Err(format!("holder information with an odd length: {reply}"));
        }
        let (mut host, mut pid, mut acquired_at, mut label) = (None, None, None, None);
        for pair in items.chunks(2) {
            let (Some(field), Some(value)) = (pair[0].as_text(), pair[1].as_text()) else {
                return Err(format!("holder information that is not text: {reply}"));
            };
            match field {
                "host" => host = Some(value.to_owned()),
                "pid" => pid = value.parse::<u32>().ok(),
                "acquired_at_us" => {
                    acquired_at = value.parse::<u64>().ok().and_then(|micros| {
                        SystemTime::UNIX_EPOCH.checked_add(Duration::from_micros(micros))
                    })
                }
                "label" => label = Some(value.to_owned()),
                // Fields a later version may add.
                _ => {}
            }
        }
        match (host, pid, acquired_at) {
            (Some(host), Some(pid), Some(acquired_at)) => Ok(Some(HolderInfo {
                host,
                pid,
                acquired_at,
                label,
            })),
            _ => Err(format!(
                "holder information without a host, a process id or a time: {reply}"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counter_ttl_is_sent_in_whole_milliseconds() {
        assert_eq!(GrantOptions::default().script_args()[0], "0");
        let options =
            GrantOptions::default().with_fencing_counter_ttl(Some(Duration::from_micros(10)));
        assert_eq!(options.script_args()[0], "1", "never 0, which means off");
        let options =
            GrantOptions::default().with_fencing_counter_ttl(Some(Duration::from_secs(3600)));
        assert_eq!(options.script_args()[0], "3600000");
    }

    #[test]
    fn holder_arguments_name_the_process_and_never_the_owner() {
        let off = GrantOptions::default().script_args();
        assert_eq!(off[1..], ["0", "", "", ""]);
        let on = GrantOptions::default()
            .with_holder_info(Some("nightly".to_owned()))
            .expect("a valid label")
            .script_args();
        assert_eq!(on[1], "1");
        assert!(!on[2].is_empty() && !on[2].contains(char::is_control));
        assert_eq!(on[3], std::process::id().to_string());
        assert_eq!(on[4], "nightly");
    }

    #[test]
    fn labels_are_bounded_and_printable() {
        for bad in ["", "a\nb", "tab\there", "\u{1b}[31mred", &"x".repeat(129)] {
            assert!(
                matches!(
                    GrantOptions::default().with_holder_info(Some(bad.to_owned())),
                    Err(LockError::InvalidConfig { field, .. }) if field == "holder_label"
                ),
                "{bad:?}"
            );
        }
        for good in ["nightly", "billing worker 7 ✓", &"x".repeat(128)] {
            GrantOptions::default()
                .with_holder_info(Some(good.to_owned()))
                .expect(good);
        }
    }

    fn text(value: &str) -> Reply {
        Reply::Data(value.as_bytes().to_vec())
    }

    #[test]
    fn holder_replies_are_checked() {
        assert_eq!(HolderInfo::from_reply(&Reply::Array(vec![])), Ok(None));
        let full = Reply::Array(
            [
                "host",
                "h",
                "pid",
                "42",
                "acquired_at_us",
                "1700000000000001",
                "label",
                "l",
                "later",
                "x",
            ]
            .map(text)
            .to_vec(),
        );
        let info = HolderInfo::from_reply(&full)
            .expect("well formed")
            .expect("some");
        assert_eq!((info.host.as_str(), info.pid), ("h", 42));
        assert_eq!(info.label.as_deref(), Some("l"));
        assert_eq!(
            info.acquired_at,
            SystemTime::UNIX_EPOCH + Duration::from_micros(1_700_000_000_000_001)
        );
        for bad in [
            Reply::Nil,
            Reply::Array(vec![text("host")]),
            Reply::Array(
                ["host", "h", "pid", "x", "acquired_at_us", "1"]
                    .map(text)
                    .to_vec(),
            ),
            Reply::Array(["label", "l"].map(text).to_vec()),
            Reply::Array(vec![text("host"), Reply::Int(1)]),
        ] {
            assert!(HolderInfo::from_reply(&bad).is_err(), "{bad}");
        }
    }
}
