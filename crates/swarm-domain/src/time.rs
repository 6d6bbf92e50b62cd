//! Timestamps: UTC with millisecond precision, written as `2026-01-20T10:00:00.000Z`.
//!
//! Both stores keep exactly milliseconds, so a value read back equals the value written.

use std::fmt;

use chrono::{DateTime, Datelike, SubsecRound, TimeZone, Timelike, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, utoipa::ToSchema)]
#[schema(value_type = String, format = DateTime, example = "2026-01-20T10:00:00.000Z")]
pub struct Timestamp(DateTime<Utc>);

impl Timestamp {
    pub fn now() -> Self {
        Timestamp(Utc::now().trunc_subsecs(3))
    }
    pub fn from_datetime(at: DateTime<Utc>) -> Self {
        Timestamp(at.trunc_subsecs(3))
    }
    pub fn from_unix_millis(millis: i64) -> Option<Self> {
        Utc.timestamp_millis_opt(millis).single().map(Timestamp)
    }
    /// `Timestamp::now().unix_millis()`, without building a date: for comparisons made on
    /// every poll.
    pub fn unix_millis_now() -> i64 {
        let since_epoch =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        i64::try_from(since_epoch.as_millis()).unwrap_or(i64::MAX)
    }
    pub fn unix_millis(&self) -> i64 {
        self.0.timestamp_millis()
    }
    pub fn datetime(&self) -> DateTime<Utc> {
        self.0
    }
    pub fn minus_millis(&self, millis: i64) -> Self {
        Timestamp(self.0 - chrono::Duration::milliseconds(millis))
    }
    pub fn plus_millis(&self, millis: i64) -> Self {
        Timestamp(self.0 + chrono::Duration::milliseconds(millis))
    }
}

impl Timestamp {
    /// `2026-01-20T10:00:00.000Z` for a year of four digits; `None` outside them. A task
    /// carries up to eight timestamps, and chrono's general formatter (which parses its
    /// format string on every call) was a tenth of the hub's CPU per answered request.
    fn rfc3339_millis(&self) -> Option<[u8; 24]> {
        let year = u32::try_from(self.0.year()).ok().filter(|year| *year <= 9999)?;
        // A leap second (chrono's 1,000 ms and up) is left to chrono.
        let millis = Some(self.0.timestamp_subsec_millis()).filter(|millis| *millis < 1000)?;
        let mut text = *b"0000-00-00T00:00:00.000Z";
        let mut put = |at: usize, digits: usize, mut value: u32| {
            for position in (at..at + digits).rev() {
                text[position] = b'0' + (value % 10) as u8;
                value /= 10;
            }
        };
        put(0, 4, year);
        put(5, 2, self.0.month());
        put(8, 2, self.0.day());
        put(11, 2, self.0.hour());
        put(14, 2, self.0.minute());
        put(17, 2, self.0.second());
        put(20, 3, millis);
        Some(text)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.rfc3339_millis() {
            // ASCII digits and separators only.
            Some(text) => f.write_str(std::str::from_utf8(&text).map_err(|_| fmt::Error)?),
            None => write!(f, "{}", self.0.format("%Y-%m-%dT%H:%M:%S%.3fZ")),
        }
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.rfc3339_millis() {
            Some(text) => {
                serializer.serialize_str(std::str::from_utf8(&text).map_err(serde::ser::Error::custom)?)
            }
            None => serializer.collect_str(self),
        }
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        DateTime::parse_from_rfc3339(&text)
            .map(|at| Timestamp::from_datetime(at.with_timezone(&Utc)))
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The poll's presence check reads the clock this way; it must be the same clock and
    /// unit as the timestamps it is compared with.
    #[test]
    fn unix_millis_now_is_now_s_milliseconds() {
        let before = Timestamp::now().unix_millis();
        let now = Timestamp::unix_millis_now();
        let after = Timestamp::now().unix_millis();
        assert!((before..=after).contains(&now), "{before} <= {now} <= {after}");
    }

    #[test]
    fn writes_milliseconds_even_when_zero() {
        let at = Timestamp::from_unix_millis(1_768_903_200_000).unwrap();
        assert_eq!(at.to_string(), "2026-01-20T10:00:00.000Z");
        let json = serde_json::to_string(&at).unwrap();
        assert_eq!(json, "\"2026-01-20T10:00:00.000Z\"");
        let back: Timestamp = serde_json::from_str(&json).unwrap();
        assert_eq!(back, at);
    }

    /// The fast writer agrees with chrono's formatter across the years it writes, and
    /// leaves the rest (years past 9999) to chrono.
    #[test]
    fn writes_what_chrono_writes() {
        let samples = [
            0,
            1,
            999,
            86_399_999,
            951_782_400_000,     // 2000-02-29
            1_768_903_200_123,   // 2026-01-20T10:00:00.123Z
            4_102_444_799_999,   // 2099-12-31T23:59:59.999Z
            253_402_300_799_999, // 9999-12-31T23:59:59.999Z
            253_402_300_800_000, // 10000-01-01
            -62_135_596_800_000, // 0001-01-01
            -1,                  // 1969-12-31T23:59:59.999Z
        ];
        for millis in samples {
            let at = Timestamp::from_unix_millis(millis).unwrap();
            let chrono = at.0.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string();
            assert_eq!(at.to_string(), chrono, "{millis}");
            assert_eq!(serde_json::to_string(&at).unwrap(), format!("\"{chrono}\""), "{millis}");
        }
    }

    #[test]
    fn now_has_no_sub_millisecond_part() {
        let now = Timestamp::now();
        assert_eq!(now.datetime().timestamp_subsec_nanos() % 1_000_000, 0);
    }
}
