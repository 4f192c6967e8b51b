//! Node URLs: `redis://[user[:password]@]host[:port][/db]`, parsed once and
//! never shown with their password.

use std::fmt;

use serde::Deserialize;

use crate::error::LockError;

/// The URL of one Redis node: `redis://[user[:password]@]host[:port][/db]`.
///
/// It is checked by [`LockConfig::validate`](crate::LockConfig::validate) and when a client connects.
/// `Debug` and `Display` hide the password.
#[derive(Clone, PartialEq, Eq, Hash, Deserialize)]
#[serde(transparent)]
pub struct NodeUrl(String);

/// The parts of a [`NodeUrl`].
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct ParsedUrl {
    pub host: String,
    pub port: u16,
    pub username: Option<String>,
    pub password: Option<String>,
    pub db: u32,
    /// `rediss://`: the connection is TLS.
    pub tls: bool,
}

impl NodeUrl {
    /// Wraps a URL; it is checked when validated or used.
    pub fn new(url: impl Into<String>) -> Self {
        NodeUrl(url.into())
    }

    /// The URL as given, password included. Keep it out of logs.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// `host:port`, for messages and logs; the raw text if the URL is malformed.
    pub fn address(&self) -> String {
        match self.parse() {
            Ok(parsed) => format_address(&parsed.host, parsed.port),
            Err(_) => "<malformed node url>".to_owned(),
        }
    }

    /// Checks the URL; errors with [`LockError::InvalidConfig`] on field `nodes`.
    pub fn validate(&self) -> Result<(), LockError> {
        self.parse()
            .map(|_| ())
            .map_err(|reason| LockError::config("nodes", reason))
    }

    /// Splits the URL into its parts.
    ///
    /// Errors name the part at fault and quote no text of the URL: a password
    /// with an unencoded `/` or `#` moves the split points, so what looks like a
    /// port or a database may be a piece of the password.
    pub(crate) fn parse(&self) -> Result<ParsedUrl, String> {
        let (rest, tls) = if let Some(rest) = self.0.strip_prefix("redis://") {
            (rest, false)
        } else if let Some(rest) = self.0.strip_prefix("rediss://") {
            (rest, true)
        } else {
            return Err(
                "a node URL must start with `redis://` (or `rediss://` for TLS)".to_owned(),
            );
        };
        // The user info runs to the last `@`, even past a `/`: a host, port or
        // database never holds an `@`, so whatever precedes it is credentials.
        let (userinfo, location) = match rest.rsplit_once('@') {
            Some((userinfo, location)) => (Some(userinfo), location),
            None => (None, rest),
        };
        let (username, password) = match userinfo {
            None => (None, None),
            Some(info) => split_userinfo(info)?,
        };
        let (hostport, path) = location.split_once('/').unwrap_or((location, ""));
        let (host, port) = split_host_port(hostport)?;
        let db = match path.trim_end_matches('/') {
            "" => 0,
            db => db
                .parse::<u32>()
                .map_err(|_| "the database (after the host's `/`) is not a number".to_owned())?,
        };
        Ok(ParsedUrl {
            host,
            port,
            username,
            password,
            db,
            tls,
        })
    }

    /// Whether the URL asks for TLS (`rediss://`).
    pub fn is_tls(&self) -> bool {
        self.0.starts_with("rediss://")
    }
}

fn non_empty(text: &str) -> Option<String> {
    (!text.is_empty()).then(|| text.to_owned())
}

/// `user:password`, either part optional. A `/`, `?` or `#` must be
/// percent-encoded there, or every client would end the host at it.
fn split_userinfo(info: &str) -> Result<(Option<String>, Option<String>), String> {
    let (user, password) = match info.split_once(':') {
        Some((user, password)) => (user, Some(password)),
        None => (info, None),
    };
    for (part, text) in [("user name", user), ("password", password.unwrap_or(""))] {
        if let Some(bad) = text.chars().find(|c| matches!(c, '/' | '?' | '#')) {
            return Err(format!(
                "the {part} holds a `{bad}`, which must be percent-encoded as `%{:02X}`",
                u32::from(bad)
            ));
        }
    }
    Ok((non_empty(user), password.and_then(non_empty)))
}

fn split_host_port(hostport: &str) -> Result<(String, u16), String> {
    let (host, port) = if let Some(rest) = hostport.strip_prefix('[') {
        let (host, after) = rest
            .split_once(']')
            .ok_or_else(|| "an IPv6 host is missing its closing `]`".to_owned())?;
        let port =
            match after {
                "" => None,
                after => Some(after.strip_prefix(':').ok_or_else(|| {
                    "only `:port` may follow an IPv6 host's closing `]`".to_owned()
                })?),
            };
        (host, port)
    } else {
        match hostport.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (hostport, None),
        }
    };
    if host.is_empty() {
        return Err("the URL has no host".to_owned());
    }
    if host.contains(char::is_whitespace) {
        return Err("the host contains whitespace".to_owned());
    }
    let port = match port {
        None => 6379,
        Some(port) => match port.parse::<u16>() {
            Ok(0) | Err(_) => return Err("the port is not a number in 1..=65535".to_owned()),
            Ok(port) => port,
        },
    };
    Ok((host.to_owned(), port))
}

fn format_address(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

impl From<&str> for NodeUrl {
    fn from(url: &str) -> Self {
        NodeUrl::new(url)
    }
}

impl From<String> for NodeUrl {
    fn from(url: String) -> Self {
        NodeUrl(url)
    }
}

impl fmt::Debug for NodeUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NodeUrl({self})")
    }
}

impl fmt::Display for NodeUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.parse() {
            Ok(url) => {
                f.write_str(if url.tls { "rediss://" } else { "redis://" })?;
                match (&url.username, &url.password) {
                    (Some(user), Some(_)) => write!(f, "{user}:***@")?,
                    (None, Some(_)) => f.write_str(":***@")?,
                    (Some(user), None) => write!(f, "{user}@")?,
                    (None, None) => {}
                }
                write!(f, "{}/{}", format_address(&url.host, url.port), url.db)
            }
            Err(_) => f.write_str("<malformed node url>"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LockConfig;

    #[test]
    fn urls_parse_and_hide_passwords() {
        let url = NodeUrl::new("redis://user:pa55@localhost:6380/2");
        let parsed = url.parse().expect("valid");
        assert_eq!(parsed.host, "localhost");
        assert_eq!(parsed.port, 6380);
        assert_eq!(parsed.username.as_deref(), Some("user"));
        assert_eq!(parsed.password.as_deref(), Some("pa55"));
        assert_eq!(parsed.db, 2);
        assert_eq!(url.to_string(), "redis://user:***@localhost:6380/2");
        assert!(!format!("{url:?}").contains("pa55"));
        assert_eq!(NodeUrl::new("redis://[::1]").address(), "[::1]:6379");
        let tls = NodeUrl::new("rediss://user:pa55@example.com:6380");
        assert!(tls.is_tls() && tls.parse().expect("a TLS URL").tls);
        assert_eq!(tls.to_string(), "rediss://user:***@example.com:6380/0");
        for bad in [
            "",
            "redis://",
            "redis://:6379",
            "redis://h:99999",
            "redis://h:x",
            "redis://h/db",
            "tcp://h",
            "rediss://",
            "redis://[::1",
        ] {
            assert!(
                NodeUrl::new(bad).parse().is_err(),
                "{bad} should be rejected"
            );
        }
    }

    /// Malformed URLs whose user info is `us3r` and `password`, one per way a
    /// URL can be wrong.
    fn malformed_urls_with(password: &str) -> Vec<String> {
        [
            "redis://us3r:{pw}@",
            "redis://:{pw}@",
            "redis://us3r:{pw}@:6379",
            "redis://us3r:{pw}@/0",
            "redis://us3r:{pw}@host:x",
            "redis://us3r:{pw}@host:0",
            "redis://us3r:{pw}@host:99999",
            "redis://us3r:{pw}@host:",
            "redis://us3r:{pw}@host/db",
            "redis://us3r:{pw}@host:6379/-1",
            "redis://us3r:{pw}@host/0?x",
            "redis://us3r:{pw}@[::1",
            "redis://us3r:{pw}@[::1]x",
            "redis://us3r:{pw}@ho st",
            "redis://us3r:{pw}",
            "redis://us3r:{pw}/0",
            "redis://us3r:{pw}@host/s3cr3t",
            "rediss://us3r:{pw}@host:x",
            "http://us3r:{pw}@host",
            "us3r:{pw}@host",
            "redis//us3r:{pw}@host",
        ]
        .iter()
        .map(|template| template.replace("{pw}", password))
        .collect()
    }

    #[test]
    fn url_errors_never_repeat_the_user_info() {
        let passwords = [
            "s3cr3t",
            "s3cr3t/h1dd3n",
            "s3cr3t#h1dd3n",
            "s3cr3t?h1dd3n",
            "s3cr3t@h1dd3n",
            "s3cr3t:h1dd3n",
            "s3cr3t/h1dd3n@",
            "/s3cr3t",
            "s3cr3t%2Fh1dd3n",
        ];
        let mut rejected = 0;
        for password in passwords {
            for url in malformed_urls_with(password) {
                let node = NodeUrl::new(url.as_str());
                let Err(err) = node.validate() else {
                    continue;
                };
                rejected += 1;
                let config_err = LockConfig::with_nodes([url.as_str()])
                    .validate()
                    .expect_err("the same URL fails in a config");
                for text in [
                    err.to_string(),
                    format!("{err:?}"),
                    config_err.to_string(),
                    format!("{config_err:?}"),
                    node.to_string(),
                    format!("{node:?}"),
                    node.address(),
                ] {
                    for secret in ["s3cr3t", "h1dd3n", "us3r"] {
                        assert!(
                            !text.contains(secret),
                            "the error for a URL with password `{password}` repeats `{secret}`: {text}"
                        );
                    }
                }
            }
        }
        assert!(
            rejected >= passwords.len() * 18,
            "most of these URLs are malformed, but only {rejected} were rejected"
        );
    }

    #[test]
    fn url_errors_name_the_part_at_fault() {
        let reason = |url: &str| match NodeUrl::new(url).validate() {
            Err(LockError::InvalidConfig { reason, .. }) => reason,
            other => panic!("{url}: expected InvalidConfig, got {other:?}"),
        };
        for (url, part) in [
            ("redis://user:s3cr3t/pw@host", "password"),
            ("redis://user:s3cr3t/pw@host", "%2F"),
            ("redis://:a#b@host", "%23"),
            ("redis://:a?b@host", "%3F"),
            ("redis://us/er:pw@host", "user name"),
            ("redis://user:pw@", "host"),
            ("redis://user:pw@host:x", "port"),
            ("redis://user:pw@host/x", "database"),
            ("redis://user:pw@[::1]x", "`]`"),
            ("redis://user:pw@ho st", "host"),
        ] {
            let reason = reason(url);
            assert!(
                reason.contains(part),
                "{url}: `{reason}` should name {part}"
            );
        }
    }

    #[test]
    fn valid_urls_with_user_info_still_parse() {
        for (url, host, port, user, password, db) in [
            ("redis://:pw@h:6379/0", "h", 6379, None, Some("pw"), 0),
            ("redis://user:pw@h", "h", 6379, Some("user"), Some("pw"), 0),
            ("redis://user@h:1/", "h", 1, Some("user"), None, 0),
            ("redis://[::1]", "::1", 6379, None, None, 0),
            ("redis://:pw@[::1]:6380/2", "::1", 6380, None, Some("pw"), 2),
            ("redis://:p@ss@h/3", "h", 6379, None, Some("p@ss"), 3),
            ("redis://:p%2Fss@h", "h", 6379, None, Some("p%2Fss"), 0),
            ("redis://u:p:w@h", "h", 6379, Some("u"), Some("p:w"), 0),
        ] {
            let parsed = NodeUrl::new(url).parse().expect(url);
            assert_eq!(parsed.host, host, "{url}");
            assert_eq!(parsed.port, port, "{url}");
            assert_eq!(parsed.username.as_deref(), user, "{url}");
            assert_eq!(parsed.password.as_deref(), password, "{url}");
            assert_eq!(parsed.db, db, "{url}");
        }
    }
}
