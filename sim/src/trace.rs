//! The recorded history of a run, its hash, and its readable timeline.
//!
//! Fault model: none; the trace only records. Oracles read nothing else:
//! what clients sent and received, what hosts received and sent, what
//! hosts wrote, synced and truncated, leases, effects, crashes and
//! restarts. The trace hash ([`TRACE_HASH_VERSION`] 2) chains a
//! word-at-a-time hash ([`Hash64`]) of every event's fields, in order, so
//! two runs of one seed must give one hash. (Version 1 hashed the `Debug`
//! text of each event with FNV-1a: a fifth of a run's time.)

use std::fmt;

/// Who did something.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Actor {
    /// The world itself (phases, fault mix).
    World,
    /// Host process `n`.
    Host(usize),
    /// Client `n`.
    Client(usize),
    /// The network.
    Net,
    /// The disk.
    Disk,
}

impl fmt::Display for Actor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Actor::World => write!(f, "world"),
            Actor::Host(n) => write!(f, "host{n}"),
            Actor::Client(n) => write!(f, "client{n}"),
            Actor::Net => write!(f, "net"),
            Actor::Disk => write!(f, "disk"),
        }
    }
}

/// One recorded event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum What {
    /// A phase began (`safety`, `liveness`, `end`).
    Phase(String),
    /// The seed's fault mix.
    FaultMix(String),
    /// A host incarnation started (`inc` counts from 1 per host);
    /// `solo_syncs`: without group commit (one sync per intake).
    HostStart {
        inc: u64,
        durable: bool,
        solo_syncs: bool,
    },
    /// The machine lost power: every host dies, unsynced bytes are lost.
    PowerLoss,
    /// A synced byte of a session log rotted (the `bitrot` scenario).
    BitRot { session: String, offset: u64 },
    /// A host incarnation died; `point` names the crash point, if any.
    HostCrash {
        inc: u64,
        point: Option<&'static str>,
    },
    /// A host incarnation was asked to stop gracefully (`Host::shutdown`).
    HostShutdown { inc: u64 },
    /// A host incarnation finished its shutdown and exited.
    HostExit { inc: u64 },
    /// A named crash point was reached (crashed or not).
    CrashPointHit { inc: u64, point: &'static str },
    /// A client opened link `link` to host `host`.
    Connect { link: u64, host: usize, inc: u64 },
    /// A link closed (`by` says who noticed: cut, crash, client, host).
    LinkClosed { link: u64, why: &'static str },
    /// A client put a line on a link.
    ClientSend { link: u64, line: String },
    /// A client got a line.
    ClientRecv { link: u64, line: String },
    /// A host read a line off a link.
    HostRecv { inc: u64, link: u64, line: String },
    /// A host put a line on a link.
    HostSend { inc: u64, link: u64, line: String },
    /// The network lost a line.
    NetDrop { link: u64, to_host: bool },
    /// The network duplicated a request line.
    NetDup { link: u64 },
    /// The network swapped two request lines.
    NetReorder { link: u64 },
    /// A lease was granted to a host.
    LeaseGrant { inc: u64, session: String },
    /// A lease was refused (another host holds it).
    LeaseDenied { inc: u64, session: String },
    /// A host released a lease (or died holding it).
    LeaseRelease { inc: u64, session: String },
    /// A host appended bytes to a session log.
    Append {
        inc: u64,
        session: String,
        bytes: Vec<u8>,
    },
    /// An append failed (disk full).
    AppendFailed { inc: u64, session: String },
    /// Opening a session's files (to load it) or reading them (without
    /// the lease) failed, as an EIO would; the host was told so.
    ReadFailed { inc: u64, session: String },
    /// An open (`what`: "open") or a read ("read", "archive read") of a
    /// session's files waits `ms` on the disk (`slow-io`): the host's other
    /// inputs may land before it completes.
    IoDelayed {
        inc: u64,
        session: String,
        what: &'static str,
        ms: u64,
    },
    /// A host armed its timer for `deadline_ms` (ms since the run's
    /// start), and it fires `ms` later than that (`late-timer`).
    TimerLate { inc: u64, deadline_ms: u64, ms: u64 },
    /// A host cut a torn tail.
    Truncate {
        inc: u64,
        session: String,
        len_bytes: u64,
    },
    /// A sync completed: the log is durable up to `upto_bytes`.
    Synced {
        inc: u64,
        session: String,
        upto_bytes: u64,
    },
    /// A sync failed; the unsynced bytes are gone.
    SyncFailed {
        inc: u64,
        session: String,
        kept_bytes: u64,
    },
    /// After a crash the file keeps `kept_bytes` (durable plus a torn
    /// prefix of the last write, if any).
    CrashKeep {
        session: String,
        kept_bytes: u64,
        torn: bool,
    },
    /// An effect was asked of a provider.
    Effect {
        inc: u64,
        provider: String,
        key: String,
        action: String,
        perform: bool,
        mutated: bool,
        lost: bool,
    },
    /// A provider's answer reached the host (`committed`, `notStarted`,
    /// `unknown`).
    EffectDone {
        inc: u64,
        key: String,
        outcome: &'static str,
    },
    /// A compaction's first step: the session's archive was cut to
    /// `at_bytes` and `bytes` (the compacted log's records, verbatim) were
    /// appended and synced.
    ArchiveAppend {
        inc: u64,
        session: String,
        at_bytes: u64,
        bytes: Vec<u8>,
    },
    /// A compaction renamed its new log over the session log: the log is
    /// now `new_bytes` (one snapshot record, synced) instead of the
    /// `bytes_before` it had. Until the directory is synced, a power loss
    /// may bring the old log back ([`What::CompactLost`]).
    Compact {
        inc: u64,
        session: String,
        bytes_before: u64,
        new_bytes: Vec<u8>,
    },
    /// A power loss lost a compaction's rename: the session log is the old
    /// one again (what of it survives follows as `CrashKeep`).
    CompactLost { session: String },
    /// A host read bytes `from_bytes..to_bytes` of a session's archive
    /// (events and answers a compaction moved out of the log, read for a
    /// `view/page` or a replay); `found`: the archive had them.
    ArchiveRead {
        inc: u64,
        session: String,
        from_bytes: u64,
        to_bytes: u64,
        found: bool,
    },
    /// A client-side note (a command given up, a session abandoned).
    Note(String),
}

/// One trace entry: time, actor, what happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Simulated time in ms.
    pub at_ms: u64,
    /// Who.
    pub actor: Actor,
    /// What.
    pub what: What,
}

/// 64-bit FNV-1a.
#[derive(Debug, Clone, Copy)]
pub struct Fnv(pub u64);

impl Fnv {
    /// The FNV offset basis.
    pub fn new() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
    /// Feeds bytes.
    pub fn bytes(&mut self, b: &[u8]) {
        for x in b {
            self.0 ^= *x as u64;
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
    /// Feeds a u64 (little endian).
    pub fn u64(&mut self, v: u64) {
        self.bytes(&v.to_le_bytes());
    }
}

impl Default for Fnv {
    fn default() -> Self {
        Fnv::new()
    }
}

/// The trace hash's algorithm version. Run files record it
/// (`"traceHashVersion"`, missing means 1): a hash of another version
/// cannot be compared, only the run's signature can.
///
/// - 1: FNV-1a over each entry's `Debug` text.
/// - 2: [`Hash64`] over each entry's fields ([`Entry::hash`]).
pub const TRACE_HASH_VERSION: u64 = 2;

/// A fast, fixed 64-bit hash over bytes (trace hash version 2): each
/// 8-byte little-endian word `w` is mixed in as
/// `h = (h.rotate_left(5) ^ w) * 0x517c_c1b7_2722_0a95` (the FxHash step),
/// a last partial word zero-padded; every byte string is preceded by its
/// length, so field boundaries count. [`Hash64::finish`] avalanches the
/// state (the splitmix64 finaliser). Not cryptographic: it tells runs
/// apart, nothing more. The algorithm is part of the hash version: any
/// change to it or to what [`Entry::hash`] feeds it needs a new
/// [`TRACE_HASH_VERSION`].
#[derive(Debug, Clone, Copy)]
pub struct Hash64(u64);

impl Hash64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;

    /// A hash seeded with `seed`.
    pub fn new(seed: u64) -> Hash64 {
        Hash64(seed)
    }

    #[inline]
    fn word(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(Self::K);
    }

    /// Feeds a u64.
    #[inline]
    pub fn u64(&mut self, v: u64) {
        self.word(v);
    }

    /// Feeds a byte string (its length first).
    pub fn bytes(&mut self, b: &[u8]) {
        self.word(b.len() as u64);
        let mut chunks = b.chunks_exact(8);
        for c in &mut chunks {
            self.word(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 8];
            last[..rest.len()].copy_from_slice(rest);
            self.word(u64::from_le_bytes(last));
        }
    }

    /// Feeds a string (its length first).
    pub fn str(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }

    /// The hash so far, avalanched.
    pub fn finish(&self) -> u64 {
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

impl Entry {
    /// The hash of this entry alone (chained into the trace hash): its
    /// time, its actor and each field of its event, in declaration order,
    /// after the event's tag (the variant's position in [`What`]).
    pub fn hash(&self) -> u64 {
        let mut h = Hash64::new(0);
        h.u64(self.at_ms);
        match self.actor {
            Actor::World => h.u64(0),
            Actor::Host(n) => {
                h.u64(1);
                h.u64(n as u64);
            }
            Actor::Client(n) => {
                h.u64(2);
                h.u64(n as u64);
            }
            Actor::Net => h.u64(3),
            Actor::Disk => h.u64(4),
        }
        let b = |v: bool| u64::from(v);
        match &self.what {
            What::Phase(p) => {
                h.u64(0);
                h.str(p);
            }
            What::FaultMix(m) => {
                h.u64(1);
                h.str(m);
            }
            What::HostStart {
                inc,
                durable,
                solo_syncs,
            } => {
                h.u64(2);
                h.u64(*inc);
                h.u64(b(*durable));
                // Only when on, so runs drawn before the mode hash as
                // they did.
                if *solo_syncs {
                    h.u64(35);
                }
            }
            What::PowerLoss => h.u64(3),
            What::BitRot { session, offset } => {
                h.u64(4);
                h.str(session);
                h.u64(*offset);
            }
            What::HostCrash { inc, point } => {
                h.u64(5);
                h.u64(*inc);
                match point {
                    None => h.u64(0),
                    Some(p) => {
                        h.u64(1);
                        h.str(p);
                    }
                }
            }
            What::CrashPointHit { inc, point } => {
                h.u64(6);
                h.u64(*inc);
                h.str(point);
            }
            What::Connect { link, host, inc } => {
                h.u64(7);
                h.u64(*link);
                h.u64(*host as u64);
                h.u64(*inc);
            }
            What::LinkClosed { link, why } => {
                h.u64(8);
                h.u64(*link);
                h.str(why);
            }
            What::ClientSend { link, line } => {
                h.u64(9);
                h.u64(*link);
                h.str(line);
            }
            What::ClientRecv { link, line } => {
                h.u64(10);
                h.u64(*link);
                h.str(line);
            }
            What::HostRecv { inc, link, line } => {
                h.u64(11);
                h.u64(*inc);
                h.u64(*link);
                h.str(line);
            }
            What::HostSend { inc, link, line } => {
                h.u64(12);
                h.u64(*inc);
                h.u64(*link);
                h.str(line);
            }
            What::NetDrop { link, to_host } => {
                h.u64(13);
                h.u64(*link);
                h.u64(b(*to_host));
            }
            What::NetDup { link } => {
                h.u64(14);
                h.u64(*link);
            }
            What::NetReorder { link } => {
                h.u64(15);
                h.u64(*link);
            }
            What::LeaseGrant { inc, session } => {
                h.u64(16);
                h.u64(*inc);
                h.str(session);
            }
            What::LeaseDenied { inc, session } => {
                h.u64(17);
                h.u64(*inc);
                h.str(session);
            }
            What::LeaseRelease { inc, session } => {
                h.u64(18);
                h.u64(*inc);
                h.str(session);
            }
            What::Append {
                inc,
                session,
                bytes,
            } => {
                h.u64(19);
                h.u64(*inc);
                h.str(session);
                h.bytes(bytes);
            }
            What::AppendFailed { inc, session } => {
                h.u64(20);
                h.u64(*inc);
                h.str(session);
            }
            What::Truncate {
                inc,
                session,
                len_bytes,
            } => {
                h.u64(21);
                h.u64(*inc);
                h.str(session);
                h.u64(*len_bytes);
            }
            What::Synced {
                inc,
                session,
                upto_bytes,
            } => {
                h.u64(22);
                h.u64(*inc);
                h.str(session);
                h.u64(*upto_bytes);
            }
            What::SyncFailed {
                inc,
                session,
                kept_bytes,
            } => {
                h.u64(23);
                h.u64(*inc);
                h.str(session);
                h.u64(*kept_bytes);
            }
            What::CrashKeep {
                session,
                kept_bytes,
                torn,
            } => {
                h.u64(24);
                h.str(session);
                h.u64(*kept_bytes);
                h.u64(b(*torn));
            }
            What::Effect {
                inc,
                provider,
                key,
                action,
                perform,
                mutated,
                lost,
            } => {
                h.u64(25);
                h.u64(*inc);
                h.str(provider);
                h.str(key);
                h.str(action);
                h.u64(b(*perform));
                h.u64(b(*mutated));
                h.u64(b(*lost));
            }
            What::EffectDone { inc, key, outcome } => {
                h.u64(26);
                h.u64(*inc);
                h.str(key);
                h.str(outcome);
            }
            What::ArchiveAppend {
                inc,
                session,
                at_bytes,
                bytes,
            } => {
                h.u64(27);
                h.u64(*inc);
                h.str(session);
                h.u64(*at_bytes);
                h.bytes(bytes);
            }
            What::Compact {
                inc,
                session,
                bytes_before,
                new_bytes,
            } => {
                h.u64(28);
                h.u64(*inc);
                h.str(session);
                h.u64(*bytes_before);
                h.bytes(new_bytes);
            }
            What::CompactLost { session } => {
                h.u64(29);
                h.str(session);
            }
            What::Note(s) => {
                h.u64(30);
                h.str(s);
            }
            What::ArchiveRead {
                inc,
                session,
                from_bytes,
                to_bytes,
                found,
            } => {
                h.u64(31);
                h.u64(*inc);
                h.str(session);
                h.u64(*from_bytes);
                h.u64(*to_bytes);
                h.u64(u64::from(*found));
            }
            What::HostShutdown { inc } => {
                h.u64(32);
                h.u64(*inc);
            }
            What::HostExit { inc } => {
                h.u64(33);
                h.u64(*inc);
            }
            What::ReadFailed { inc, session } => {
                h.u64(34);
                h.u64(*inc);
                h.str(session);
            }
            What::IoDelayed {
                inc,
                session,
                what,
                ms,
            } => {
                h.u64(35);
                h.u64(*inc);
                h.str(session);
                h.str(what);
                h.u64(*ms);
            }
            What::TimerLate {
                inc,
                deadline_ms,
                ms,
            } => {
                h.u64(36);
                h.u64(*inc);
                h.u64(*deadline_ms);
                h.u64(*ms);
            }
        }
        h.finish()
    }
}

impl fmt::Display for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = self.at_ms;
        write!(
            f,
            "{:>6}.{:03}s {:<8} ",
            t / 1000,
            t % 1000,
            self.actor.to_string()
        )?;
        let short = short_id;
        match &self.what {
            What::Phase(p) => write!(f, "== phase {p} =="),
            What::FaultMix(m) => write!(f, "fault mix: {m}"),
            What::HostStart {
                inc,
                durable,
                solo_syncs,
            } => {
                write!(
                    f,
                    "start incarnation {inc} ({}{})",
                    if *durable { "durable" } else { "ephemeral" },
                    if *solo_syncs {
                        ", one sync per intake"
                    } else {
                        ""
                    }
                )
            }
            What::PowerLoss => write!(f, "POWER LOSS: every host dies, unsynced bytes are lost"),
            What::BitRot { session, offset } => write!(
                f,
                "BIT ROT: byte {offset} of {} flipped (synced, records follow it)",
                short(session)
            ),
            What::HostCrash { inc, point } => match point {
                Some(p) => write!(f, "CRASH incarnation {inc} at crash point {p}"),
                None => write!(f, "CRASH incarnation {inc}"),
            },
            What::CrashPointHit { inc, point } => {
                write!(f, "crash point {point} reached (inc {inc})")
            }
            What::HostShutdown { inc } => {
                write!(f, "SHUTDOWN asked of incarnation {inc} (graceful stop)")
            }
            What::HostExit { inc } => write!(f, "EXIT incarnation {inc} (shutdown finished)"),
            What::Connect { link, host, inc } => {
                write!(f, "connect link{link} -> host{host} (inc {inc})")
            }
            What::LinkClosed { link, why } => write!(f, "link{link} closed ({why})"),
            What::ClientSend { link, line } => write!(f, "send link{link} {}", line.trim_end()),
            What::ClientRecv { link, line } => write!(f, "recv link{link} {}", line.trim_end()),
            What::HostRecv { inc, link, line } => {
                write!(f, "(inc {inc}) recv link{link} {}", line.trim_end())
            }
            What::HostSend { inc, link, line } => {
                write!(f, "(inc {inc}) send link{link} {}", line.trim_end())
            }
            What::NetDrop { link, to_host } => {
                write!(
                    f,
                    "drop a line on link{link} {}",
                    if *to_host { "to host" } else { "to client" }
                )
            }
            What::NetDup { link } => write!(f, "duplicate a request on link{link}"),
            What::NetReorder { link } => write!(f, "reorder requests on link{link}"),
            What::LeaseGrant { inc, session } => {
                write!(f, "(inc {inc}) lease granted {}", short(session))
            }
            What::LeaseDenied { inc, session } => {
                write!(f, "(inc {inc}) lease denied {}", short(session))
            }
            What::LeaseRelease { inc, session } => {
                write!(f, "(inc {inc}) lease released {}", short(session))
            }
            What::Append {
                inc,
                session,
                bytes,
            } => {
                write!(
                    f,
                    "(inc {inc}) append {} bytes to {}",
                    bytes.len(),
                    short(session)
                )?;
                if let Ok(d) = msp::core::record::decode_log(bytes) {
                    for (r, _) in d.records.iter() {
                        write!(f, " [{}]", record_summary(r))?;
                    }
                }
                Ok(())
            }
            What::AppendFailed { inc, session } => write!(
                f,
                "(inc {inc}) append to {} failed: disk full",
                short(session)
            ),
            What::ReadFailed { inc, session } => {
                write!(f, "(inc {inc}) read of {} failed: EIO", short(session))
            }
            What::IoDelayed {
                inc,
                session,
                what,
                ms,
            } => write!(
                f,
                "(inc {inc}) {what} of {} waits {ms} ms on the disk",
                short(session)
            ),
            What::TimerLate {
                inc,
                deadline_ms,
                ms,
            } => write!(
                f,
                "(inc {inc}) timer for {deadline_ms} ms fires {ms} ms late"
            ),
            What::Truncate {
                inc,
                session,
                len_bytes,
            } => {
                write!(
                    f,
                    "(inc {inc}) truncate {} to {len_bytes} bytes",
                    short(session)
                )
            }
            What::Synced {
                inc,
                session,
                upto_bytes,
            } => write!(
                f,
                "(inc {inc}) synced {} up to {upto_bytes}",
                short(session)
            ),
            What::SyncFailed {
                inc,
                session,
                kept_bytes,
            } => {
                write!(
                    f,
                    "(inc {inc}) FSYNC FAILED {} (file keeps {kept_bytes} bytes)",
                    short(session)
                )
            }
            What::CrashKeep {
                session,
                kept_bytes,
                torn,
            } => {
                write!(
                    f,
                    "{} keeps {kept_bytes} bytes{}",
                    short(session),
                    if *torn { " (torn)" } else { "" }
                )
            }
            What::ArchiveAppend {
                inc,
                session,
                at_bytes,
                bytes,
            } => write!(
                f,
                "(inc {inc}) compaction archives {} bytes of {} at {at_bytes} (synced)",
                bytes.len(),
                short(session)
            ),
            What::Compact {
                inc,
                session,
                bytes_before,
                new_bytes,
            } => {
                write!(
                    f,
                    "(inc {inc}) compaction renames a {}-byte log over {} ({bytes_before} bytes)",
                    new_bytes.len(),
                    short(session)
                )?;
                if let Ok(d) = msp::core::record::decode_log(new_bytes) {
                    for (r, _) in d.records.iter() {
                        write!(f, " [{}]", record_summary(r))?;
                    }
                }
                Ok(())
            }
            What::CompactLost { session } => write!(
                f,
                "{} lost its compaction's rename: the old log is back",
                short(session)
            ),
            What::ArchiveRead {
                inc,
                session,
                from_bytes,
                to_bytes,
                found,
            } => write!(
                f,
                "(inc {inc}) reads bytes {from_bytes}..{to_bytes} of the archive of {}{}",
                short(session),
                if *found { "" } else { ": not there" }
            ),
            What::EffectDone { inc, key, outcome } => write!(
                f,
                "(inc {inc}) effect answer for key {}: {outcome}",
                key.rsplit(':').next().map(short).unwrap_or_default()
            ),
            What::Effect {
                inc,
                provider,
                key,
                perform,
                mutated,
                lost,
                ..
            } => write!(
                f,
                "(inc {inc}) effect {} at {provider} key {}{}{}",
                if *perform { "perform" } else { "query" },
                key.rsplit(':').next().map(short).unwrap_or_default(),
                if *mutated { " MUTATED" } else { "" },
                if *lost { " (response lost)" } else { "" }
            ),
            What::Note(s) => write!(f, "{s}"),
        }
    }
}

/// A short, distinguishing form of an id: the last 8 characters of a
/// UUID (its random tail; the leading 8 are the shared timestamp).
pub fn short_id(s: &str) -> String {
    let n = s.chars().count();
    s.chars().skip(n.saturating_sub(8)).collect()
}

/// One short phrase per log record, for the timeline.
pub fn record_summary(r: &msp::core::record::Record) -> String {
    use msp::core::record::{Outcome, Record};
    let short = short_id;
    match r {
        Record::Created { .. } => "created".into(),
        Record::Loaded { .. } => "loaded".into(),
        Record::Received {
            command_id, method, ..
        } => format!("received {method} {}", short(command_id)),
        Record::Settled {
            command_id,
            outcome,
        } => {
            let o = match outcome {
                Outcome::Applied => "applied",
                Outcome::Rejected { .. } => "rejected",
                Outcome::Abandoned => "abandoned",
            };
            format!("settled {} {o}", short(command_id))
        }
        Record::Event { n, method, .. } => format!("event #{n} {method}"),
        Record::Closed { reason, .. } => format!("closed {reason}"),
        Record::Snapshot(snap) => format!(
            "snapshot of {} records, archive {} bytes",
            snap.record_count, snap.archive_len
        ),
    }
}

/// The recorded history of one run.
#[derive(Debug, Clone)]
pub struct Trace {
    /// Entries in order.
    pub entries: Vec<Entry>,
    /// Each entry's hash chained ([`TRACE_HASH_VERSION`] 2), kept up to
    /// date by [`Trace::push`]; `None` in a view that is only judged
    /// ([`Trace::logical`]), whose [`Trace::hash`] is then chained when
    /// asked for (a run's oracles never ask, so the view's entries are not
    /// hashed for nothing).
    hash: Option<u64>,
}

impl Default for Trace {
    fn default() -> Trace {
        Trace {
            entries: Vec::new(),
            hash: Some(0),
        }
    }
}

/// One more link of a trace's hash chain: `entry` after `chain`.
fn chain(chain: u64, entry: &Entry) -> u64 {
    let mut h = Hash64::new(chain);
    h.u64(entry.hash());
    h.finish()
}

impl Trace {
    /// An empty trace.
    pub fn new() -> Trace {
        Trace::default()
    }

    /// Records one event.
    pub fn push(&mut self, at_ms: u64, actor: Actor, what: What) {
        let e = Entry { at_ms, actor, what };
        if let Some(h) = &mut self.hash {
            *h = chain(*h, &e);
        }
        self.entries.push(e);
    }

    /// The chained hash of every entry so far (of version
    /// [`TRACE_HASH_VERSION`]).
    pub fn hash(&self) -> u64 {
        match self.hash {
            Some(h) => h,
            None => self.entries.iter().fold(0, chain),
        }
    }

    /// The trace as a host that never compacts would have left it on disk:
    /// compaction entries dropped, and every offset of a session log
    /// (`Synced`, `Truncate`, `SyncFailed`, `CrashKeep`) turned from the
    /// log file's physical offset into the *logical* one (the archive
    /// followed by the log's records after its snapshot, see
    /// `msp::core::snapshot`). A lost rename brings the old file's mapping
    /// back and cuts the logical log to the old file's length. A `BitRot`
    /// moves with its byte. Oracles that
    /// do not read snapshots can judge a compacting run through this view.
    pub fn logical(&self) -> Trace {
        // Per session: (snapshot bytes, archive length) of the current log
        // file, and of the file a compaction renamed over (with its length).
        let mut now: std::collections::BTreeMap<String, (u64, u64)> = Default::default();
        let mut before: std::collections::BTreeMap<String, ((u64, u64), u64)> = Default::default();
        let map = |m: Option<&(u64, u64)>, phys: u64| match m {
            Some((s, a)) => phys.saturating_sub(*s) + a,
            None => phys,
        };
        // Only judged: its hash is chained only if someone asks for it.
        let mut out = Trace {
            entries: Vec::with_capacity(self.entries.len()),
            hash: None,
        };
        for (i, e) in self.entries.iter().enumerate() {
            let what = match &e.what {
                What::ArchiveAppend { .. } => continue,
                What::Compact {
                    session,
                    bytes_before,
                    new_bytes,
                    ..
                } => {
                    let archive_len =
                        msp::core::record::decode_log(new_bytes).map_or(0, |d| d.archive_len);
                    let old = now.get(session).copied().unwrap_or((0, 0));
                    before.insert(session.clone(), (old, *bytes_before));
                    now.insert(session.clone(), (new_bytes.len() as u64, archive_len));
                    continue;
                }
                What::CompactLost { session } => {
                    let Some((old, len)) = before.remove(session) else {
                        continue;
                    };
                    now.insert(session.clone(), old);
                    // The old file's unsynced bytes are lost with the power:
                    // the `CrashKeep` that follows says what it keeps. With
                    // none (nothing of it was unsynced), it keeps all of it.
                    let kept_follows = self.entries[i + 1..]
                        .iter()
                        .take_while(|x| x.actor == Actor::Disk)
                        .any(|x| matches!(&x.what, What::CrashKeep { session: s, .. } if s == session));
                    if kept_follows {
                        continue;
                    }
                    What::CrashKeep {
                        session: session.clone(),
                        kept_bytes: map(Some(&old), len),
                        torn: false,
                    }
                }
                What::Synced {
                    inc,
                    session,
                    upto_bytes,
                } => What::Synced {
                    inc: *inc,
                    session: session.clone(),
                    upto_bytes: map(now.get(session), *upto_bytes),
                },
                What::Truncate {
                    inc,
                    session,
                    len_bytes,
                } => What::Truncate {
                    inc: *inc,
                    session: session.clone(),
                    len_bytes: map(now.get(session), *len_bytes),
                },
                What::SyncFailed {
                    inc,
                    session,
                    kept_bytes,
                } => What::SyncFailed {
                    inc: *inc,
                    session: session.clone(),
                    kept_bytes: map(now.get(session), *kept_bytes),
                },
                What::CrashKeep {
                    session,
                    kept_bytes,
                    torn,
                } => What::CrashKeep {
                    session: session.clone(),
                    kept_bytes: map(now.get(session), *kept_bytes),
                    torn: *torn,
                },
                What::BitRot { session, offset } => {
                    // Never inside a snapshot (`Sim::maybe_rot`): those
                    // bytes have no logical offset.
                    debug_assert!(now.get(session).is_none_or(|(s, _)| offset >= s));
                    What::BitRot {
                        session: session.clone(),
                        offset: map(now.get(session), *offset),
                    }
                }
                What::LeaseGrant { session, .. } => {
                    // The grant syncs the directory: a pending rename stays.
                    before.remove(session);
                    e.what.clone()
                }
                other => other.clone(),
            };
            out.push(e.at_ms, e.actor, what);
        }
        out
    }

    /// Index of the first entry where two traces differ, if any.
    pub fn first_divergence(&self, other: &Trace) -> Option<usize> {
        let n = self.entries.len().min(other.entries.len());
        (0..n)
            .find(|i| self.entries[*i] != other.entries[*i])
            .or((self.entries.len() != other.entries.len()).then_some(n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A view built without the hash chain answers [`Trace::hash`] as a
    /// trace that pushed the same entries.
    #[test]
    fn an_unhashed_view_hashes_as_a_pushed_trace() {
        let mut t = Trace::new();
        assert_eq!(t.logical().hash(), t.hash());
        t.push(1, Actor::World, What::Phase("setup".into()));
        t.push(2, Actor::Client(0), What::Note("a note".into()));
        t.push(3, Actor::Disk, What::Phase("liveness".into()));
        let view = t.logical();
        assert_eq!(view.entries, t.entries);
        assert_eq!(view.hash(), t.hash());
        assert_ne!(t.hash(), Trace::new().hash());
    }
}
