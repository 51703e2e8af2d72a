//! URLs as messages may show them: a user name and password (`s3://key:secret@bucket/…`,
//! `https://user:pass@push.example/`) and a query string (`?token=…`, a presigned URL's
//! signature) are credentials, and logs are read by more people than the secrets are meant
//! for. Works on any text, whether or not its URLs parse, so a refused URL is hidden too.

/// What stands where a secret was.
const HIDDEN: &str = "***";

/// `text` with the user information and the query string of every `scheme://` URL in it
/// replaced by `***`.
pub fn redact_urls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (before, after) = rest.split_at(at + 3);
        out.push_str(before);
        // The URL runs to the first character no URL in a message holds.
        let end =
            after.find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '`' | '<' | '>')).unwrap_or(after.len());
        let (url, tail) = after.split_at(end);
        out.push_str(&redact_one(url));
        rest = tail;
    }
    out.push_str(rest);
    out
}

/// One URL after its `scheme://`.
fn redact_one(url: &str) -> String {
    let authority_end = url.find(['/', '?', '#']).unwrap_or(url.len());
    let (authority, path) = url.split_at(authority_end);
    let host = match authority.rfind('@') {
        Some(at) => format!("{HIDDEN}@{}", authority.get(at + 1..).unwrap_or_default()),
        None => authority.to_owned(),
    };
    let path = match path.find('?') {
        Some(at) => {
            let fragment =
                path.get(at..).and_then(|q| q.find('#')).map_or("", |f| path.get(at + f..).unwrap_or_default());
            format!("{}?{HIDDEN}{fragment}", path.get(..at).unwrap_or_default())
        }
        None => path.to_owned(),
    };
    format!("{host}{path}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_information_and_queries_are_hidden_wherever_they_are() {
        let cases = [
            (
                "--metrics-push https://user:hunter2@push.example:9091/x is not a URL",
                "https://***@push.example:9091/x is",
            ),
            ("cannot read s3://AKIA:SECRET@bucket/in.parquet: no credentials", "s3://***@bucket/in.parquet: no"),
            ("\"http://h/api?token=abc&x=1\" refused", "\"http://h/api?***\" refused"),
            ("https://a:b@h/p?sig=1#frag", "https://***@h/p?***#frag"),
            // A URL no parser takes (a bad escape, a port out of range) is hidden all the same.
            ("--openlineage-url http://user:p%zz@h:99999/", "http://***@h:99999/"),
        ];
        for (text, expected) in cases {
            let redacted = redact_urls(text);
            assert!(redacted.contains(expected), "{text} -> {redacted}");
            for secret in ["hunter2", "SECRET", "token=abc", "sig=1", "p%zz"] {
                assert!(!redacted.contains(secret), "{text} -> {redacted}");
            }
        }
        assert_eq!(redact_urls("no url here: a/b?c"), "no url here: a/b?c");
        assert_eq!(redact_urls("s3://bucket/key.parquet"), "s3://bucket/key.parquet");
    }
}
