//! The service's one time source: every timestamp it writes, every lease it grants or
//! finds expired, every schedule it fires reads `Service::clock`. Production uses the
//! system clock; tests give the hub a clock they move (`HubOptions::clock`, no flag), so
//! a cron test or an expired lease is a write of the time, not a wait through it.

use std::path::PathBuf;

use swarm_domain::time::Timestamp;

pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> Timestamp;

    /// `now()` in Unix milliseconds, for comparisons on hot paths (a null poll) that
    /// need no date.
    fn unix_millis(&self) -> i64 {
        self.now().unix_millis()
    }
}

#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }

    fn unix_millis(&self) -> i64 {
        Timestamp::unix_millis_now()
    }
}

/// The time written in a file (RFC 3339), read at every call. An unreadable file
/// reads as the system time, so a test that has not written it yet sees real time.
#[derive(Debug, Clone)]
pub struct FileClock {
    path: PathBuf,
}

impl FileClock {
    pub fn new(path: PathBuf) -> Self {
        FileClock { path }
    }
}

impl Clock for FileClock {
    fn now(&self) -> Timestamp {
        std::fs::read_to_string(&self.path)
            .ok()
            .and_then(|text| chrono::DateTime::parse_from_rfc3339(text.trim()).ok())
            .map(|at| Timestamp::from_datetime(at.with_timezone(&chrono::Utc)))
            .unwrap_or_else(Timestamp::now)
    }
}
