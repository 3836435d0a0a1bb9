//! One model call through the run's HTTP client: the destination checks
//! and pinning of `fetch`, the provider's key in its header, the stream
//! read as it arrives, and retries with backoff.
