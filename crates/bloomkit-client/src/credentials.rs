//! Passwords: where a connection takes them from (the URL, else
//! `$REDISCLI_AUTH`, as `redis-cli` does), and how every message that shows
//! a server keeps them out ([`redact_url`], [`redact_text`]). A URL is
//! printed in errors, progress and summaries; its password never is.

use crate::error::{Error, Result};

/// The environment variable a password is taken from when the URL gives
/// none: `redis-cli`'s, so that a shell set up for it works as it is.
pub const AUTH_VARIABLE: &str = "REDISCLI_AUTH";

/// What stands in a message where a password was.
const HIDDEN: &str = "***";

/// The schemes whose URLs carry a password in their authority
/// (`scheme://user:password@host`); a socket's URL carries it in its query.
fn is_socket_scheme(scheme: &str) -> bool {
    let scheme = scheme.to_ascii_lowercase();
    scheme == "unix" || scheme.ends_with("+unix")
}

/// A query's password values (`pass=`, `password=`) hidden.
fn redact_query(query: &str) -> String {
    query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((name, _)) if matches!(name.to_ascii_lowercase().as_str(), "pass" | "password") => {
                format!("{name}={HIDDEN}")
            }
            _ => pair.to_string(),
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// `url` as it may be shown: the password of `scheme://user:password@host`
/// (or `scheme://:password@host`) and a `pass=` or `password=` query value
/// replaced by `***`; the rest as given. The user part stops at the last
/// `@`, so that a password with an unencoded `@` or `/` is hidden whole.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_string() };
    let (rest, query) = match rest.split_once('?') {
        Some((r, q)) => (r, Some(q)),
        None => (rest, None),
    };
    let rest = match rest.rfind('@') {
        Some(at) if !is_socket_scheme(scheme) => {
            let (userinfo, host) = rest.split_at(at);
            match userinfo.split_once(':') {
                Some((user, _)) => format!("{user}:{HIDDEN}{host}"),
                None => rest.to_string(),
            }
        }
        _ => rest.to_string(),
    };
    match query {
        Some(q) => format!("{scheme}://{rest}?{}", redact_query(q)),
        None => format!("{scheme}://{rest}"),
    }
}

/// `text` with the password of every URL in it hidden ([`redact_url`]), a
/// URL ending at whitespace or a quote: for messages that quote what a
/// user typed (an address given where a key was expected, say).
pub fn redact_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        // The scheme: the letters, digits, `+`, `-` and `.` before `://`.
        let start = rest[..at]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
            .map_or(0, |i| i + 1);
        let end = rest[at..]
            .find(|c: char| c.is_whitespace() || matches!(c, '\'' | '"' | '`' | ',' | ')'))
            .map_or(rest.len(), |i| at + i);
        out.push_str(&rest[..start]);
        out.push_str(&redact_url(&rest[start..end]));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// The connection settings for `address` (a URL or `host:port`, see
/// [`crate::server_url`]), with the password of `$REDISCLI_AUTH` when the
/// URL has none, as `redis-cli` takes it. The URL's own password wins.
pub fn connection_info(address: &str) -> Result<redis::ConnectionInfo> {
    let url = crate::server_url(address)?;
    let info = redis::IntoConnectionInfo::into_connection_info(url.as_str())
        .map_err(|_| Error::InvalidUrl(redact_url(&url)))?;
    match std::env::var(AUTH_VARIABLE) {
        Ok(password) if !password.is_empty() && info.redis_settings().password().is_none() => {
            let settings = info.redis_settings().clone().set_password(password);
            Ok(info.set_redis_settings(settings))
        }
        _ => Ok(info),
    }
}

#[cfg(test)]
mod tests {
    use super::{redact_text, redact_url};

    #[test]
    fn passwords_never_show() {
        let cases = [
            ("redis://admin:topsecret@127.0.0.1:26999", "redis://admin:***@127.0.0.1:26999"),
            ("redis://:topsecret@h:1/2", "redis://:***@h:1/2"),
            ("rediss://u:top%40secret@h:1", "rediss://u:***@h:1"),
            ("redis://u:top@sec/ret@h:1/0", "redis://u:***@h:1/0"),
            ("redis://admin@h:1", "redis://admin@h:1"),
            ("redis://h:1/0?protocol=resp3", "redis://h:1/0?protocol=resp3"),
            ("unix:///run/r@1.sock?db=1&pass=topsecret", "unix:///run/r@1.sock?db=1&pass=***"),
            ("redis+unix:///tmp/r.sock?password=topsecret", "redis+unix:///tmp/r.sock?password=***"),
            ("127.0.0.1:6379", "127.0.0.1:6379"),
        ];
        for (given, shown) in cases {
            assert_eq!(redact_url(given), shown, "{given}");
        }
        assert_eq!(
            redact_text(
                "key 'redis://a:topsecret@h:1' does not exist on redis://:pw2@h:2 (and rediss://x:y@z)"
            ),
            "key 'redis://a:***@h:1' does not exist on redis://:***@h:2 (and rediss://x:***@z)"
        );
        assert_eq!(redact_text("no url here: a:b@c"), "no url here: a:b@c");
    }
}
