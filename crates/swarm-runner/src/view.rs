//! The terminal view: what the runner waits for, what runs, what finished. Lines for
//! people on stderr, or JSON events through `tracing` (`--json`), never both.
//!
//! The caller of [`crate::run`] installs the `tracing` subscriber for JSON output; in
//! text mode this module writes to stderr itself so that the lines stay short.

use std::time::Duration;

use crate::config::OutputFormat;

/// Writes the runner's events. Cheap to clone; every line names the agent, so several
/// runners in one process (`swarm demo`) stay readable.
#[derive(Debug, Clone)]
pub(crate) struct View {
    agent: String,
    format: OutputFormat,
}

/// How important a line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Level {
    Info,
    Warn,
}

impl View {
    pub fn new(agent: &str, format: OutputFormat) -> View {
        View { agent: agent.to_string(), format }
    }

    /// One event: `event` names it for machines, `message` says it for people, `fields`
    /// carry its details (they are only shown in JSON).
    pub fn emit(&self, level: Level, event: &str, message: &str, fields: &[(&str, String)]) {
        match self.format {
            OutputFormat::Text => {
                let time = chrono::Local::now().format("%H:%M:%S");
                let marker = if level == Level::Warn { "! " } else { "" };
                eprintln!("{time} {agent} │ {marker}{message}", agent = self.agent);
            }
            OutputFormat::Json => {
                let details: serde_json::Map<String, serde_json::Value> =
                    fields.iter().map(|(key, value)| (key.to_string(), value.clone().into())).collect();
                let details = serde_json::Value::Object(details).to_string();
                match level {
                    Level::Info => {
                        tracing::info!(agent = %self.agent, event, details = %details, "{message}")
                    }
                    Level::Warn => {
                        tracing::warn!(agent = %self.agent, event, details = %details, "{message}")
                    }
                }
            }
        }
    }

    pub fn info(&self, event: &str, message: &str, fields: &[(&str, String)]) {
        self.emit(Level::Info, event, message, fields);
    }

    pub fn warn(&self, event: &str, message: &str, fields: &[(&str, String)]) {
        self.emit(Level::Warn, event, message, fields);
    }
}

/// `1h02m`, `3m05s`, `4.2s`: elapsed time for people.
pub(crate) fn human_duration(elapsed: Duration) -> String {
    let seconds = elapsed.as_secs();
    if seconds >= 3600 {
        format!("{}h{:02}m", seconds / 3600, (seconds % 3600) / 60)
    } else if seconds >= 60 {
        format!("{}m{:02}s", seconds / 60, seconds % 60)
    } else {
        format!("{:.1}s", elapsed.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_naturally() {
        assert_eq!(human_duration(Duration::from_millis(4_200)), "4.2s");
        assert_eq!(human_duration(Duration::from_secs(185)), "3m05s");
        assert_eq!(human_duration(Duration::from_secs(3_720)), "1h02m");
    }
}
