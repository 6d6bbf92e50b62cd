//! Timestamps: UTC with millisecond precision, written as `2026-01-20T10:00:00.000Z`.
//!
//! Both stores keep exactly milliseconds, so a value read back equals the value written.

use std::fmt;

use chrono::{DateTime, SubsecRound, TimeZone, Utc};
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

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0.format("%Y-%m-%dT%H:%M:%S%.3fZ"))
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
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

    #[test]
    fn writes_milliseconds_even_when_zero() {
        let at = Timestamp::from_unix_millis(1_768_903_200_000).unwrap();
        assert_eq!(at.to_string(), "2026-01-20T10:00:00.000Z");
        let json = serde_json::to_string(&at).unwrap();
        assert_eq!(json, "\"2026-01-20T10:00:00.000Z\"");
        let back: Timestamp = serde_json::from_str(&json).unwrap();
        assert_eq!(back, at);
    }

    #[test]
    fn now_has_no_sub_millisecond_part() {
        let now = Timestamp::now();
        assert_eq!(now.datetime().timestamp_subsec_nanos() % 1_000_000, 0);
    }
}
