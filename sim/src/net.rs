//! Links: connections between one client and one host incarnation that
//! carry the same `\n`-terminated JSON lines a real socket does.
//!
//! Fault model: a line may be lost (`drop`), a request duplicated (`dup`),
//! delayed (`delay`, order kept), or moved ahead of the previous undelivered
//! request (`reorder`, requests only: responses and events keep their order
//! as on a stream); a link may be `cut` (both directions at once); a client
//! may leave (`reconnect`). A host's death closes its links.

/// One link.
#[derive(Debug, Clone)]
pub struct Link {
    /// Link id (global, never reused).
    pub id: u64,
    /// The client end.
    pub client: usize,
    /// The host end.
    pub host: usize,
    /// The host incarnation it was opened to.
    pub inc: u64,
    /// The host's connection id.
    pub conn: msp::core::ConnId,
    /// The client may still read.
    pub client_open: bool,
    /// The host may still read.
    pub host_open: bool,
    /// Latest scheduled arrival towards the host.
    pub to_host_last_ms: u64,
    /// Latest scheduled arrival towards the client.
    pub to_client_last_ms: u64,
}
