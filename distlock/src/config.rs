//! The front door's config: a strategy plus a [`LockConfig`], from a TOML file
//! and from `DISTLOCK_*` environment variables (which win); what reading it
//! warns of, and the settings of waiting, retries and the watchdog.
//! [`Config`] and [`LockConfig`] are also at the crate's root.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::str::FromStr;

pub use lock_core::{LockConfig, RetryPolicy, WaitMode, WatchdogConfig};
use lock_core::{LockError, Topology};
use serde::Deserialize;

/// [`Config::ENV_PREFIX`], for short.
const ENV_PREFIX: &str = Config::ENV_PREFIX;

/// The fields a `DISTLOCK_*` variable can set, dotted where nested
/// (`retry.max_delay` is `DISTLOCK_RETRY__MAX_DELAY`). A unit test checks the
/// list against [`LockConfig`]'s own.
const ENV_FIELDS: &[&str] = &[
    "strategy",
    "nodes",
    "topology",
    "sentinel_service",
    "sentinel_auth.username",
    "sentinel_auth.password",
    "tls.ca_file",
    "tls.cert_file",
    "tls.key_file",
    "replicas.count",
    "replicas.timeout",
    "client",
    "ttl",
    "key_prefix",
    "wait_timeout",
    "wait_mode",
    "fair",
    "retry.initial_delay",
    "retry.max_delay",
    "retry.multiplier",
    "watchdog.enabled",
    "watchdog.interval",
    "watchdog.max_hold",
    "connect_timeout",
    "command_timeout",
    "node_timeout",
    "clock_drift_factor",
    "metrics_lock_names",
    "fencing",
    "fencing_counter_ttl",
    "holder_info",
    "holder_label",
];

/// `DISTLOCK_*` variables that are not config, without the prefix: the
/// `distlock` command's log filter (`LOG`), what it hands the commands it
/// runs (`KEY`, `FENCING_TOKEN`), and `OWNER`, kept for an owner token. A job
/// inherits them, so a `distlock` call inside it must not read them as config.
const NON_CONFIG_VARS: &[&str] = &["LOG", "KEY", "FENCING_TOKEN", "OWNER"];

/// Which locking strategy to build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Strategy {
    /// One node, `SET NX PX` with fencing tokens, or without them with
    /// `fencing = false` (`lock-redis-single`).
    Single,
    /// One node, re-entered by its owner (`lock-reentrant`).
    Reentrant,
    /// A majority of N independent nodes (`lock-redlock`).
    Redlock,
}

impl Strategy {
    /// The name used in config.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Single => "single",
            Strategy::Reentrant => "reentrant",
            Strategy::Redlock => "redlock",
        }
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Strategy {
    type Err = LockError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.to_ascii_lowercase().as_str() {
            "single" => Ok(Strategy::Single),
            "reentrant" => Ok(Strategy::Reentrant),
            "redlock" => Ok(Strategy::Redlock),
            _ => Err(invalid(
                "strategy",
                "is not one of `single`, `reentrant`, `redlock`",
            )),
        }
    }
}

/// Something a config reader ignored that looks like a mistake, returned by
/// [`Config::from_env_with_warnings`] and [`Config::from_vars_with_warnings`]
/// for the caller to show (the other readers log it with `tracing`).
/// `Display` writes one line that names the variable and what it meant.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigWarning {
    /// A `DISTLOCK_*` variable that names no config field but is close to
    /// one (`DISTLOCK_TLL`), or a section without its field
    /// (`DISTLOCK_WATCHDOG`): it was ignored.
    MisspeltVariable {
        /// The variable as it was set, prefix included: `DISTLOCK_TLL`.
        variable: String,
        /// The variables it most likely meant: `DISTLOCK_TTL`.
        meant: Vec<String>,
    },
}

impl fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigWarning::MisspeltVariable { variable, meant } => write!(
                f,
                "ignoring {variable}: no config field has that name; did you mean {}?",
                meant.join(" or ")
            ),
        }
    }
}

/// A strategy and the lock settings.
///
/// In TOML, `strategy` sits next to the [`LockConfig`] fields:
///
/// ```
/// let config = distlock::Config::from_toml_str(r#"
///     strategy = "redlock"
///     nodes = ["redis://127.0.0.1:6379", "redis://127.0.0.1:6380", "redis://127.0.0.1:6381"]
///     ttl = "10s"
///     [watchdog]
///     interval = "2s"
/// "#).unwrap();
/// assert_eq!(config.strategy(), distlock::config::Strategy::Redlock);
/// ```
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Config {
    /// The strategy, if set. See [`Config::strategy`] for the default.
    pub strategy: Option<Strategy>,
    /// Everything else.
    pub lock: LockConfig,
}

impl Config {
    /// The prefix of the environment variables read by
    /// [`from_env`](Self::from_env): `DISTLOCK_`.
    pub const ENV_PREFIX: &'static str = "DISTLOCK_";

    /// A config with these lock settings and the default strategy.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use distlock::config::Strategy;
    /// use distlock::{Config, LockConfig};
    ///
    /// let config = Config::new(
    ///     LockConfig::with_nodes(["redis://127.0.0.1:6379"]).with_ttl(Duration::from_secs(10)),
    /// )
    /// .with_strategy(Strategy::Reentrant);
    /// config.validate().unwrap();
    /// assert_eq!(config.strategy(), Strategy::Reentrant);
    /// ```
    pub fn new(lock: LockConfig) -> Self {
        Config {
            strategy: None,
            lock,
        }
    }

    /// This config with `strategy`.
    pub fn with_strategy(mut self, strategy: Strategy) -> Self {
        self.strategy = Some(strategy);
        self
    }

    /// The strategy in force: the configured one, else `single`.
    ///
    /// Several standalone nodes never choose Redlock by themselves: a second
    /// URL may be a replica added "for HA", and Redlock over it issues no
    /// fencing tokens. [`Config::validate`] refuses them without a
    /// `strategy`.
    pub fn strategy(&self) -> Strategy {
        self.strategy.unwrap_or(Strategy::Single)
    }

    /// Parses TOML and validates it. Errors name the field.
    pub fn from_toml_str(text: &str) -> Result<Self, LockError> {
        let table: toml::Table = text
            .parse()
            .map_err(|err: toml::de::Error| invalid("config", err.message().to_owned()))?;
        let config = Self::from_table(table, &|field| field.to_owned())?;
        config.validate()?;
        Ok(config)
    }

    /// Reads `DISTLOCK_*` variables from the process environment; see
    /// [`Config::from_vars`]. A variable that looks like a misspelt field is
    /// ignored with a `tracing` warning, which nobody sees without a
    /// subscriber: [`Config::from_env_with_warnings`] returns it instead.
    pub fn from_env() -> Result<Self, LockError> {
        Self::from_vars(process_env())
    }

    /// As [`Config::from_env`], and returns what it ignored that looks like
    /// a mistake, for the caller to show: a library without a `tracing`
    /// subscriber learns of `DISTLOCK_TLL` this way. Nothing is logged.
    ///
    /// ```
    /// let (config, warnings) = distlock::Config::from_env_with_warnings()?;
    /// for warning in &warnings {
    ///     eprintln!("config: {warning}");
    /// }
    /// # let _ = config;
    /// # Ok::<(), distlock::LockError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Config::from_vars`]: [`LockError::InvalidConfig`] naming the
    /// variable or field.
    pub fn from_env_with_warnings() -> Result<(Self, Vec<ConfigWarning>), LockError> {
        Self::from_vars_with_warnings(process_env())
    }

    /// Builds a config from `DISTLOCK_*` variables alone (others are ignored):
    /// `DISTLOCK_NODES` is a comma-separated list, `DISTLOCK_STRATEGY`,
    /// `DISTLOCK_TTL`, `DISTLOCK_CLIENT` and the other [`LockConfig`] fields
    /// by their upper-case names, and nested fields with a double underscore
    /// (`DISTLOCK_RETRY__MAX_DELAY`, `DISTLOCK_WATCHDOG__ENABLED`). Errors
    /// name the variable.
    ///
    /// Only variables that name a field are read. `DISTLOCK_LOG`,
    /// `DISTLOCK_KEY`, `DISTLOCK_FENCING_TOKEN` and `DISTLOCK_OWNER` are not
    /// config and are skipped; any other `DISTLOCK_*` variable is skipped too,
    /// with a `tracing` warning when it looks like a misspelt field
    /// (`DISTLOCK_TLL`, `DISTLOCK_RETRY_MAX_DELAY`, `DISTLOCK_WATCHDOG`).
    /// [`Config::from_vars_with_warnings`] returns those warnings instead.
    pub fn from_vars<I, K, V>(vars: I) -> Result<Self, LockError>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let (config, warnings) = Self::from_vars_with_warnings(vars)?;
        log(&warnings);
        Ok(config)
    }

    /// As [`Config::from_vars`], and returns the variables it ignored that
    /// look like misspelt fields, as [`ConfigWarning`]s, instead of logging
    /// them: a misspelt variable is not an error (another program may own a
    /// `DISTLOCK_` name), but the caller should say so.
    ///
    /// ```
    /// use distlock::config::ConfigWarning;
    /// use distlock::Config;
    ///
    /// let (config, warnings) = Config::from_vars_with_warnings([("DISTLOCK_TLL", "5s")])?;
    /// assert_eq!(config.lock.ttl, std::time::Duration::from_secs(30));
    /// assert!(matches!(
    ///     &warnings[..],
    ///     [ConfigWarning::MisspeltVariable { variable, .. }] if variable == "DISTLOCK_TLL"
    /// ));
    /// # Ok::<(), distlock::LockError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidConfig`] naming the variable or field, as
    /// [`Config::from_vars`].
    pub fn from_vars_with_warnings<I, K, V>(
        vars: I,
    ) -> Result<(Self, Vec<ConfigWarning>), LockError>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let (table, warnings) = env_table(vars)?;
        let config = Self::from_table(table, &env_name)?;
        config.validate()?;
        Ok((config, warnings))
    }

    /// The file at `path` (if any), then `DISTLOCK_*` variables on top.
    pub fn load(path: Option<&Path>) -> Result<Self, LockError> {
        Self::load_with(path, std::iter::empty::<(&str, &str)>())
    }

    /// As [`Config::load`], with `overrides` (`DISTLOCK_*` pairs, read as
    /// [`Config::from_vars`] reads them) on top of the environment: the
    /// `distlock` command's `--nodes` flag is `DISTLOCK_NODES` here.
    pub fn load_with<I, K, V>(path: Option<&Path>, overrides: I) -> Result<Self, LockError>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let mut table = match path {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|err| {
                    invalid("config", format!("cannot read {}: {err}", path.display()))
                })?;
                text.parse::<toml::Table>().map_err(|err| {
                    invalid("config", format!("{}: {}", path.display(), err.message()))
                })?
            }
            None => toml::Table::new(),
        };
        for vars in [env_table(process_env())?, env_table(overrides)?] {
            let (vars, warnings) = vars;
            log(&warnings);
            merge(&mut table, vars);
        }
        let config = Self::from_table(table, &|field| field.to_owned())?;
        config.validate()?;
        Ok(config)
    }

    /// Checks the whole config; errors name the field. Several standalone
    /// nodes need a `strategy` (or a `topology`); Redlock refuses one node
    /// and two, whose majority is both.
    pub fn validate(&self) -> Result<(), LockError> {
        self.lock.validate()?;
        if self.strategy() == Strategy::Redlock {
            lock_redlock::validate_config(&self.lock)?;
            // Refused as two nodes are: one node is a single-node lock
            // without its fencing tokens, at the cost of Redlock's rounds.
            if self.lock.nodes.len() == 1 {
                return Err(invalid(
                    "nodes",
                    "Redlock over 1 node is a single-node lock without fencing tokens: use \
                     the `single` strategy on one node (with fencing tokens), or 3 or 5 \
                     independent masters for Redlock",
                ));
            }
        } else if self.lock.topology == Topology::Standalone && self.lock.nodes.len() > 1 {
            let count = self.lock.nodes.len();
            return Err(match self.strategy {
                None => invalid(
                    "strategy",
                    format!(
                        "is not set, and {count} standalone nodes are listed: set `strategy = \
                         \"redlock\"` for a majority of independent masters (no fencing tokens), \
                         `topology = \"cluster\"` or `\"sentinel\"` if they are one deployment, \
                         or list one node"
                    ),
                ),
                Some(strategy) => invalid(
                    "nodes",
                    format!(
                        "the `{strategy}` strategy uses one standalone node, but {count} are \
                         configured; use `redlock`, list one, or set `topology` for a cluster \
                         or sentinel group"
                    ),
                ),
            });
        }
        Ok(())
    }

    fn from_table(
        mut table: toml::Table,
        name: &dyn Fn(&str) -> String,
    ) -> Result<Self, LockError> {
        let strategy = match table.remove("strategy") {
            None => None,
            Some(toml::Value::String(text)) => Some(text.parse().map_err(|_| {
                invalid(
                    &name("strategy"),
                    "is not one of `single`, `reentrant`, `redlock`",
                )
            })?),
            Some(other) => {
                return Err(invalid(
                    &name("strategy"),
                    format!("expected a string, got {}", other.type_str()),
                ))
            }
        };
        // Deserialize from text, so an error carries the span of its key.
        let text = toml::to_string(&table).map_err(|err| invalid("config", err.to_string()))?;
        let lock = toml::from_str::<LockConfig>(&text).map_err(|err| {
            let mut message = redact_values(err.message());
            let field = err
                .span()
                .and_then(|span| field_at(&text, span.start))
                .or_else(|| field_in_message(&message))
                .unwrap_or_else(|| "config".to_owned());
            if let Some(meant) = message
                .starts_with("unknown field")
                .then(|| closest_field(&field))
                .flatten()
            {
                message = format!("{message}; did you mean `{meant}`?");
            }
            invalid(&name(&field), message)
        })?;
        Ok(Config { strategy, lock })
    }
}

fn invalid(field: &str, reason: impl Into<String>) -> LockError {
    LockError::InvalidConfig {
        field: field.to_owned(),
        reason: reason.into(),
    }
}

/// `retry.max_delay` as its environment variable, `DISTLOCK_RETRY__MAX_DELAY`.
fn env_name(field: &str) -> String {
    format!(
        "{ENV_PREFIX}{}",
        field.replace('.', "__").to_ascii_uppercase()
    )
}

/// The dotted name of the key on the line at byte `offset` of TOML `text`
/// (`retry.max_delay`), from the `key = value` line and the `[section]` above it.
fn field_at(text: &str, offset: usize) -> Option<String> {
    let line_start = text[..offset.min(text.len())]
        .rfind('\n')
        .map_or(0, |at| at + 1);
    let line = text[line_start..].lines().next()?;
    let key = line.split_once('=')?.0.trim().trim_matches('"');
    let section = text[..line_start]
        .lines()
        .rev()
        .find_map(|line| line.trim().strip_prefix('[')?.strip_suffix(']'));
    Some(match section {
        Some(section) => format!("{section}.{key}"),
        None => key.to_owned(),
    })
}

/// The first backquoted name in a serde message (`unknown field `tll``).
fn field_in_message(message: &str) -> Option<String> {
    let start = message.find('`')? + 1;
    let end = start + message[start..].find('`')?;
    Some(message[start..end].to_owned())
}

/// A serde message without the values it quotes (`invalid value: string
/// "redis://user:pw@h", expected a duration`, ``unknown variant `x` ``): a
/// value in the wrong place may be a password. Field names stay.
fn redact_values(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    loop {
        let string_at = rest.find("string \"");
        let variant_at = rest.find("unknown variant `");
        match (string_at, variant_at) {
            (Some(at), variant) if variant.is_none_or(|variant| at < variant) => {
                out.push_str(&rest[..at]);
                out.push_str("a string");
                // Serde quotes with `{:?}`, so an inner quote is escaped.
                let value = &rest[at + "string \"".len()..];
                let mut escaped = false;
                let end = value.char_indices().find_map(|(index, c)| {
                    let closes = c == '"' && !escaped;
                    escaped = c == '\\' && !escaped;
                    closes.then_some(index + 1)
                });
                rest = &value[end.unwrap_or(value.len())..];
            }
            (_, Some(at)) => {
                out.push_str(&rest[..at]);
                out.push_str("unknown variant");
                let value = &rest[at + "unknown variant `".len()..];
                rest = value
                    .rfind("`, expected")
                    .map_or("", |end| &value[end + 1..]);
            }
            (_, None) => {
                out.push_str(rest);
                return out;
            }
        }
    }
}

/// Fields whose values are not strings, so text from the environment must be
/// converted before deserializing.
fn env_value(path: &[String], text: &str) -> Result<toml::Value, String> {
    let field = path.join(".");
    match field.as_str() {
        "nodes" => Ok(toml::Value::Array(
            text.split(',')
                .map(str::trim)
                .filter(|url| !url.is_empty())
                .map(|url| toml::Value::String(url.to_owned()))
                .collect(),
        )),
        "watchdog.enabled" | "fair" | "fencing" | "holder_info" => text
            .parse::<bool>()
            .map(toml::Value::Boolean)
            .map_err(|_| "is not `true` or `false`".to_owned()),
        "replicas.count" | "metrics_lock_names" => text
            .parse::<u32>()
            .map(|count| toml::Value::Integer(i64::from(count)))
            .map_err(|_| "is not a whole number".to_owned()),
        "clock_drift_factor" | "retry.multiplier" => text
            .parse::<f64>()
            .map(toml::Value::Float)
            .map_err(|_| "is not a number".to_owned()),
        _ => Ok(toml::Value::String(text.to_owned())),
    }
}

/// The process environment as text. A variable that is not Unicode is kept
/// with its bad bytes replaced, so it can neither crash the reader (as
/// `std::env::vars` would) nor pass for valid config.
fn process_env() -> impl Iterator<Item = (String, String)> {
    std::env::vars_os().map(|(key, value)| {
        (
            key.to_string_lossy().into_owned(),
            value.to_string_lossy().into_owned(),
        )
    })
}

/// The `DISTLOCK_*` variables that name config fields, as a TOML table;
/// other `DISTLOCK_*` variables are skipped (see [`Config::from_vars`]),
/// and those that look like misspelt fields returned beside it.
fn env_table<I, K, V>(vars: I) -> Result<(toml::Table, Vec<ConfigWarning>), LockError>
where
    I: IntoIterator<Item = (K, V)>,
    K: AsRef<str>,
    V: AsRef<str>,
{
    let mut table = toml::Table::new();
    let mut warnings = Vec::new();
    let sorted: BTreeMap<String, String> = vars
        .into_iter()
        .filter_map(|(key, value)| {
            let name = key.as_ref().strip_prefix(ENV_PREFIX)?.to_owned();
            Some((name, value.as_ref().to_owned()))
        })
        .collect();
    for (name, text) in sorted {
        let upper = name.to_ascii_uppercase();
        let Some(field) = ENV_FIELDS.iter().find(|field| env_suffix(field) == upper) else {
            if !NON_CONFIG_VARS.contains(&upper.as_str()) {
                warnings.extend(misspelt(&name, &upper));
            }
            continue;
        };
        let path: Vec<String> = field.split('.').map(str::to_owned).collect();
        let value = env_value(&path, &text)
            .map_err(|reason| invalid(&format!("{ENV_PREFIX}{name}"), reason))?;
        let mut slot = &mut table;
        for section in &path[..path.len() - 1] {
            let entry = slot
                .entry(section.clone())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            // Unreachable with ENV_FIELDS: no field is both a section and a value.
            slot = match entry {
                toml::Value::Table(inner) => inner,
                _ => {
                    return Err(invalid(
                        &format!("{ENV_PREFIX}{name}"),
                        "is nested under a plain value",
                    ))
                }
            };
        }
        slot.insert(path[path.len() - 1].clone(), value);
    }
    Ok((table, warnings))
}

/// `retry.max_delay` as a variable name after the prefix, `RETRY__MAX_DELAY`.
fn env_suffix(field: &str) -> String {
    field.replace('.', "__").to_ascii_uppercase()
}

/// A warning about `DISTLOCK_<name>` (upper-cased: `upper`), which names no
/// field, if it looks like a field misspelt: at most two edits from one, a
/// section without its field (`WATCHDOG`), or a field or section with an
/// unknown part after `__` (`RETRY__MAX`, `TTL__SECS`).
fn misspelt(name: &str, upper: &str) -> Option<ConfigWarning> {
    let suffixes: Vec<String> = ENV_FIELDS.iter().map(|field| env_suffix(field)).collect();
    let closest = suffixes
        .iter()
        .map(|suffix| (edit_distance(upper, suffix), suffix))
        .filter(|(distance, _)| *distance <= 2)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, suffix)| vec![suffix.as_str()]);
    let head = upper.split("__").next().unwrap_or(upper);
    let same_head = || {
        let fields: Vec<&str> = suffixes
            .iter()
            .map(String::as_str)
            .filter(|suffix| suffix.split("__").next() == Some(head))
            .collect();
        (!fields.is_empty()).then_some(fields)
    };
    let meant = closest.or_else(same_head)?;
    Some(ConfigWarning::MisspeltVariable {
        variable: format!("{ENV_PREFIX}{name}"),
        meant: meant
            .iter()
            .map(|suffix| format!("{ENV_PREFIX}{suffix}"))
            .collect(),
    })
}

/// Logs `warnings` as `tracing` warnings, for the readers that do not
/// return them.
fn log(warnings: &[ConfigWarning]) {
    for warning in warnings {
        tracing::warn!("{warning}");
    }
}

/// The config field a misspelt dotted `field` most likely meant: one at most
/// two edits away (`tll`: `ttl`; `watchdog.intervl`: `watchdog.interval`),
/// or else a nested field of that name set at the top level (`max_hold`:
/// `watchdog.max_hold`).
fn closest_field(field: &str) -> Option<&'static str> {
    let close = ENV_FIELDS
        .iter()
        .map(|known| (edit_distance(field, known), *known))
        .filter(|(distance, _)| *distance <= 2)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, known)| known);
    close.or_else(|| {
        ENV_FIELDS
            .iter()
            .find(|known| {
                known
                    .rsplit_once('.')
                    .is_some_and(|(_, last)| last == field)
            })
            .copied()
    })
}

/// The Levenshtein distance between two ASCII names.
fn edit_distance(a: &str, b: &str) -> usize {
    let b = b.as_bytes();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, &left) in a.as_bytes().iter().enumerate() {
        let mut current = Vec::with_capacity(b.len() + 1);
        current.push(i + 1);
        for (j, &right) in b.iter().enumerate() {
            let replace = previous[j] + usize::from(left != right);
            current.push(replace.min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    previous[b.len()]
}

/// Puts `overrides` over `base`, section by section.
fn merge(base: &mut toml::Table, overrides: toml::Table) {
    for (key, value) in overrides {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(inner)), toml::Value::Table(more)) => merge(inner, more),
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lock_core::ClientKind;

    /// The names serde lists after "expected one of" for an unknown field in
    /// `section` (empty for the top level), dotted.
    fn serde_fields(section: &str) -> Vec<String> {
        let text = if section.is_empty() {
            "no_such_field = 1".to_owned()
        } else {
            format!("[{section}]\nno_such_field = 1")
        };
        let err = toml::from_str::<LockConfig>(&text).expect_err("an unknown field");
        let message = err.message().to_owned();
        let (_, expected) = message
            .split_once("expected ")
            .unwrap_or_else(|| panic!("serde lists the fields: {message}"));
        // "`a`", "`a` or `b`", "one of `a`, `b`, `c`": every other piece
        // between backquotes is a name.
        expected
            .split('`')
            .skip(1)
            .step_by(2)
            .map(|name| {
                if section.is_empty() {
                    name.to_owned()
                } else {
                    format!("{section}.{name}")
                }
            })
            .collect()
    }

    #[test]
    fn env_fields_are_exactly_the_config_fields() {
        let mut fields = vec!["strategy".to_owned()];
        for field in serde_fields("") {
            match field.as_str() {
                "retry" | "watchdog" | "tls" | "sentinel_auth" | "replicas" => {
                    fields.extend(serde_fields(&field))
                }
                _ => fields.push(field),
            }
        }
        fields.sort();
        let mut listed: Vec<String> = ENV_FIELDS.iter().map(|&field| field.to_owned()).collect();
        listed.sort();
        assert_eq!(
            listed, fields,
            "ENV_FIELDS must list every LockConfig field (a new section needs a line in this test)"
        );
    }

    #[test]
    fn an_unknown_toml_field_suggests_the_closest() {
        for (toml, field, meant) in [
            ("tll = \"5s\"", "tll", "ttl"),
            (
                "[watchdog]\nintervl = \"5s\"",
                "watchdog.intervl",
                "watchdog.interval",
            ),
            ("max_hold = \"1h\"", "max_hold", "watchdog.max_hold"),
        ] {
            match Config::from_toml_str(toml) {
                Err(LockError::InvalidConfig {
                    field: named,
                    reason,
                }) => {
                    assert_eq!(named, field, "{toml}");
                    assert!(
                        reason.contains(&format!("did you mean `{meant}`?")),
                        "{toml}: {reason}"
                    );
                }
                other => panic!("{toml}: {other:?}"),
            }
        }
        match Config::from_toml_str("colour = \"blue\"") {
            Err(LockError::InvalidConfig { reason, .. }) => {
                assert!(
                    !reason.contains("did you mean"),
                    "nothing is close: {reason}"
                )
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn several_standalone_nodes_need_a_strategy() {
        let two = r#"nodes = ["redis://127.0.0.1:6379", "redis://127.0.0.1:6380"]"#;
        match Config::from_toml_str(two) {
            Err(LockError::InvalidConfig { field, reason }) => {
                assert_eq!(field, "strategy");
                for choice in ["redlock", "cluster", "sentinel"] {
                    assert!(reason.contains(choice), "names `{choice}`: {reason}");
                }
            }
            other => panic!("two nodes chose a strategy by themselves: {other:?}"),
        }
        match Config::from_toml_str(&format!("strategy = \"redlock\"\n{two}")) {
            Err(LockError::InvalidConfig { field, .. }) => assert_eq!(field, "nodes"),
            other => panic!("Redlock over two nodes: {other:?}"),
        }
        let three = r#"nodes = ["redis://127.0.0.1:6379", "redis://127.0.0.1:6380", "redis://127.0.0.1:6381"]"#;
        let config = Config::from_toml_str(&format!("strategy = \"redlock\"\n{three}"))
            .expect("three Redlock nodes");
        assert_eq!(config.strategy(), Strategy::Redlock);
        let cluster = Config::from_toml_str(&format!("topology = \"cluster\"\n{two}"))
            .expect("the seeds of one cluster");
        assert_eq!(cluster.strategy(), Strategy::Single);
    }

    #[test]
    fn edit_distance_counts_single_edits() {
        assert_eq!(edit_distance("TTL", "TTL"), 0);
        assert_eq!(edit_distance("TLL", "TTL"), 1);
        assert_eq!(edit_distance("NODE", "NODES"), 1);
        assert_eq!(edit_distance("RETRY_MAX_DELAY", "RETRY__MAX_DELAY"), 1);
        assert_eq!(edit_distance("", "TTL"), 3);
        assert_eq!(edit_distance("HOME", "NODES"), 3);
    }

    /// The README's "Configuration" block: the first TOML block after that
    /// heading.
    fn readme_config_block() -> String {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md");
        let readme = std::fs::read_to_string(path).expect("the workspace README");
        let section = readme
            .split_once("### Configuration")
            .expect("a Configuration section in the README")
            .1;
        let block = section
            .split_once("```toml\n")
            .expect("a TOML block in the Configuration section")
            .1;
        block
            .split_once("```")
            .expect("the end of that TOML block")
            .0
            .to_owned()
    }

    #[test]
    fn readme_config_is_the_default_config() {
        let block = readme_config_block();
        let mut parsed = Config::from_toml_str(&block).expect("the README's config parses");
        // The README shows `client = "redis"`, the default when that client
        // is compiled in; a fred-only build defaults to fred.
        if !ClientKind::Redis.is_compiled() {
            assert_eq!(parsed.lock.client, ClientKind::Redis);
            parsed.lock.client = ClientKind::default();
        }
        assert_eq!(
            format!("{parsed:?}"),
            format!("{:?}", Config::default()),
            "the README's Configuration block must be the default config"
        );
    }

    #[test]
    fn readme_config_names_every_field() {
        let block = readme_config_block();
        // (section, key) for each line that sets a key, commented out or not.
        let mut section = String::new();
        let mut named = Vec::new();
        for line in block.lines() {
            let line = line.trim();
            if let Some(header) = line.strip_prefix('[') {
                section = header.split(']').next().unwrap_or_default().to_owned();
                continue;
            }
            let line = line.trim_start_matches('#').trim_start();
            if let Some((key, _)) = line.split_once(" = ") {
                if !key.contains(' ') {
                    named.push(if section.is_empty() {
                        key.to_owned()
                    } else {
                        format!("{section}.{key}")
                    });
                }
            }
        }
        for field in ENV_FIELDS {
            assert!(
                named.iter().any(|name| name == field),
                "the README's Configuration block does not show `{field}`"
            );
        }
    }
}
