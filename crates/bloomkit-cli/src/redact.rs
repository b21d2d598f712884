//! No password reaches the terminal: every message (`say!`, clap's errors,
//! `info`'s output) passes through [`scrub`], which hides the password of
//! any URL in it and every password this run was given, wherever it
//! appears (a URL typed where a key was expected is echoed in "key ...
//! does not exist"). The passwords are those of the URLs on the command
//! line and in `$BLOOMKIT_URL` and `$REDIS_URL`, and `$REDISCLI_AUTH`.

use std::sync::OnceLock;

/// The passwords given to this run, as typed and percent-decoded.
static SECRETS: OnceLock<Vec<String>> = OnceLock::new();

/// Passwords shorter than this are hidden only where a URL holds them: a
/// two-letter password replaced everywhere would garble every message.
const SHORTEST_SCRUBBED: usize = 4;

/// The password in `url`'s user part (`scheme://user:password@host`) or
/// query (`pass=`, `password=`), as written there.
fn password_of(url: &str) -> Vec<String> {
    let Some((_, rest)) = url.split_once("://") else { return Vec::new() };
    let mut found = Vec::new();
    let (authority, query) = match rest.split_once('?') {
        Some((a, q)) => (a, Some(q)),
        None => (rest, None),
    };
    if let Some((userinfo, _)) = authority.rsplit_once('@') {
        if let Some((_, password)) = userinfo.split_once(':') {
            found.push(password.to_string());
        }
    }
    for pair in query.unwrap_or_default().split('&') {
        if let Some((name, value)) = pair.split_once('=') {
            if matches!(name.to_ascii_lowercase().as_str(), "pass" | "password") {
                found.push(value.to_string());
            }
        }
    }
    found
}

/// `%XX` escapes decoded (a password with `@` is typed `%40` in a URL).
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Collects the passwords this run was given; called first thing in `main`.
pub fn init() {
    let mut secrets = Vec::new();
    let urls = std::env::args()
        .chain(crate::server::SERVER_VARIABLES.iter().filter_map(|v| std::env::var(v).ok()))
        .filter(|a| a.contains("://"));
    for url in urls {
        // (`--redis=URL` holds its URL after the `=`.)
        let start = url[..url.find("://").unwrap_or(0)].rfind('=').map_or(0, |i| i + 1);
        for password in password_of(&url[start..]) {
            secrets.push(percent_decoded(&password));
            secrets.push(password);
        }
    }
    if let Ok(password) = std::env::var(bloomkit_client::AUTH_VARIABLE) {
        secrets.push(password);
    }
    secrets.retain(|s| s.len() >= SHORTEST_SCRUBBED);
    // Longest first, so that a password containing another is hidden whole.
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    secrets.dedup();
    let _ = SECRETS.set(secrets);
}

/// `text` with every URL's password and every password given hidden.
pub fn scrub(text: &str) -> String {
    let mut text = bloomkit_client::redact_text(text);
    for secret in SECRETS.get().map(Vec::as_slice).unwrap_or_default() {
        if text.contains(secret.as_str()) {
            text = text.replace(secret.as_str(), "***");
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::{password_of, percent_decoded};

    #[test]
    fn passwords_are_found_where_urls_keep_them() {
        assert_eq!(password_of("redis://admin:top%40secret@h:1/0"), ["top%40secret"]);
        assert_eq!(password_of("redis://:pw12@h:1"), ["pw12"]);
        assert_eq!(password_of("redis://admin@h:1"), Vec::<String>::new());
        assert_eq!(password_of("unix:///s.sock?db=1&pass=sock-secret"), ["sock-secret"]);
        assert_eq!(percent_decoded("top%40secret%2"), "top@secret%2");
    }
}
