//! What the Pushgateway's and the lineage service's requests share: one client with a
//! deadline, an error for an unsuccessful answer, and URLs without their credentials.

use std::time::Duration;

/// `url` as messages may show it: without a user name, password or query.
pub fn redacted(url: &str) -> String {
    batch_io::redact::redact_urls(url)
}

/// The client for both services: a deadline on every request.
pub fn http_client(deadline: Duration) -> anyhow::Result<reqwest::Client> {
    reqwest::Client::builder()
        .timeout(deadline)
        .connect_timeout(deadline)
        .build()
        .map_err(|e| anyhow::anyhow!("cannot start an HTTP client: {e}"))
}

/// An error naming `what` and the answer, unless the status is a success.
pub async fn expect_success(response: reqwest::Response, what: &str) -> anyhow::Result<()> {
    let status = response.status();
    if status.is_success() {
        return Ok(());
    }
    let body = response.text().await.unwrap_or_default();
    let body: String = body.trim().chars().take(300).collect();
    anyhow::bail!("{what} answered {status}: {body}")
}
