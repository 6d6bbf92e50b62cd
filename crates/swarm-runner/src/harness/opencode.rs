//! opencode: its harness file (`opencode.toml`) and what the runner reads of `opencode run
//! --format json`.

use serde_json::Value;

use super::report::RunReport;

/// Takes in one `--format json` event.
pub(crate) fn observe(report: &mut RunReport, event: &Value) {
    let _ = (report, event);
}
