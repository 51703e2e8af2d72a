//! URLs as messages may show them: a user name and password (`s3://key:secret@bucket/…`,
//! `https://user:pass@push.example/`) and a query string or fragment (`?token=…`, a presigned
//! URL's signature) are credentials, and logs are read by more people than the secrets are
//! meant for. Works on any text, whether or not its URLs parse: a refused URL (no scheme,
//! `http:/` with one slash, a port out of range) is hidden too.

/// What stands where a secret was.
const HIDDEN: &str = "***";

/// `text` with the user information (`user:password@`) and the query string or fragment of
/// every URL-like word in it replaced by `***`.
pub fn redact_urls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        // A word runs to the first character no URL in a message holds.
        let end = rest.find(is_boundary).unwrap_or(rest.len());
        let (word, tail) = rest.split_at(end);
        out.push_str(&redact_word(word));
        let boundary = tail.chars().next().map_or(0, char::len_utf8);
        out.push_str(tail.get(..boundary).unwrap_or_default());
        rest = tail.get(boundary..).unwrap_or_default();
    }
    out
}

fn is_boundary(c: char) -> bool {
    c.is_whitespace() || matches!(c, '"' | '\'' | '`' | '<' | '>' | '(' | ')' | ',' | ';')
}

/// One word: its user information (where it holds a password, or the word has a scheme) and
/// its query string or `key=value` fragment.
fn redact_word(word: &str) -> String {
    let after_scheme = word.find("://").map_or(0, |at| at + 3);
    let (scheme, rest) = word.split_at(after_scheme);
    let (locator, query) = rest.split_at(rest.find(['?', '#']).unwrap_or(rest.len()));
    // A query is hidden where the word could be a location or the query holds `key=value`:
    // `spam?yes`, a label quoted in a message, stays as it is.
    let location = after_scheme > 0 || locator.contains(['/', '.', ':', '@']);
    let query = if location || query.contains('=') { hide_query(query) } else { query.to_owned() };
    format!("{scheme}{}{query}", hide_user(locator, after_scheme > 0))
}

/// `user:password@host/path` as `***@host/path`, also behind a stray `http:/`; a bare
/// `user@host` (no password) only where the word had a scheme, so `bob@example.com` stays.
fn hide_user(locator: &str, has_scheme: bool) -> String {
    let Some(at) = locator.rfind('@') else { return locator.to_owned() };
    let (before, host) = locator.split_at(at);
    let start = before.rfind('/').map_or(0, |slash| slash + 1);
    let (prefix, user) = before.split_at(start);
    if (has_scheme && start == 0) || user.contains(':') {
        format!("{prefix}{HIDDEN}{host}")
    } else {
        locator.to_owned()
    }
}

/// `?query#fragment` as `?***`, and a fragment that carries `key=value` as `#***`.
fn hide_query(query: &str) -> String {
    let (query, fragment) = query.split_at(query.find('#').unwrap_or(query.len()));
    let query = if query.len() > 1 { format!("?{HIDDEN}") } else { query.to_owned() };
    let fragment = if fragment.contains('=') { format!("#{HIDDEN}") } else { fragment.to_owned() };
    format!("{query}{fragment}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_information_and_queries_are_hidden_wherever_they_are() {
        let cases = [
            (
                "--metrics-push https://user:hunter2@push.example:99999/x is not a URL",
                "https://***@push.example:99999/x is",
            ),
            ("cannot read s3://AKIA:SECRET@bucket/in.parquet: no credentials", "s3://***@bucket/in.parquet: no"),
            ("\"http://h/api?token=abc&x=1\" refused", "\"http://h/api?***\" refused"),
            ("https://a:b@h/p?sig=1#frag", "https://***@h/p?***#frag"),
            // URLs no parser takes are hidden all the same.
            ("--openlineage-url http://user:p%zz@h:99999/", "http://***@h:99999/"),
            ("--metrics-push user:hunter2@127.0.0.1:9 is not a URL", "***@127.0.0.1:9 is"),
            ("cannot reach http:/user:hunter2@127.0.0.1:9/metrics/job", "http:/***@127.0.0.1:9/metrics/job"),
            ("--metrics-push 127.0.0.1:9/?token=abc", "127.0.0.1:9/?***"),
            // A word that is no location keeps its question mark: a label, a question.
            ("label `spam?yes` is not one of the model's", "`spam?yes` is"),
            ("--metrics-push localhost?token=abc", "localhost?***"),
            ("--openlineage-url http://h/#token=abc", "http://h/#***"),
            ("(http://u:pw@h/x)", "(http://***@h/x)"),
        ];
        for (text, expected) in cases {
            let redacted = redact_urls(text);
            assert!(redacted.contains(expected), "{text} -> {redacted}");
            for secret in ["hunter2", "SECRET", "token=abc", "sig=1", "p%zz", ":pw@"] {
                assert!(!redacted.contains(secret), "{text} -> {redacted}");
            }
        }
        for plain in ["no url here: a/b?", "s3://bucket/key.parquet", "mail bob@example.com", "12:30 in ./a b"] {
            assert_eq!(redact_urls(plain), plain);
        }
    }
}
