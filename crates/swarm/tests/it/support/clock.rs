//! A clock the test moves: the hub reads the time from a file (`FileClock`, given as
//! `HubOptions::clock`), so a lease runs out when the test writes a later time, not
//! when a second of real time has passed.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use swarm_domain::time::Timestamp;
use swarm_hub::HubOptions;
use swarm_service::clock::{Clock, FileClock};

pub struct TestClock {
    path: PathBuf,
}

impl TestClock {
    /// A clock file in `dir`, not written yet: the hub reads real time until the test
    /// first moves it.
    pub fn in_dir(dir: &Path) -> TestClock {
        TestClock { path: dir.join("clock") }
    }

    /// A clock file in `dir` reading the time now, and staying there until the test
    /// moves it: nothing expires behind the test's back, however slow the machine.
    pub fn stopped(dir: &Path) -> TestClock {
        let clock = TestClock::in_dir(dir);
        clock.advance(Duration::ZERO);
        clock
    }

    /// Hub options reading this clock.
    pub fn options(&self) -> HubOptions {
        HubOptions { clock: Some(Arc::new(FileClock::new(self.path.clone()))), ..HubOptions::default() }
    }

    /// The time the hub reads now.
    pub fn now(&self) -> Timestamp {
        FileClock::new(self.path.clone()).now()
    }

    /// Moves the clock `by` forward from what it reads now, and stops it there: from
    /// then on nothing more expires until the test moves it again.
    pub fn advance(&self, by: Duration) {
        let millis = i64::try_from(by.as_millis()).expect("a test's step fits");
        let at = self.now().plus_millis(millis).datetime();
        let text = at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        // Written whole and renamed, so the hub never reads half a time.
        let partial = self.path.with_extension("partial");
        std::fs::write(&partial, text).expect("write the test clock");
        std::fs::rename(&partial, &self.path).expect("move the test clock");
    }
}
