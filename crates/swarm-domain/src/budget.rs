//! Daily budgets (issue 40, the reference's shapes): a ceiling in USD on one UTC day's
//! session costs, for the whole hub (`global`) or for one agent. A poll that would start
//! work (an assigned task, a pool task) while a ceiling is reached is refused inside its
//! claim transaction: it gets a `budget_refused` trigger instead, and a refusal is
//! recorded once per agent, task and day.

use chrono::{Days, NaiveTime, TimeZone, Utc};
use serde::Serialize;

use crate::{
    Invalid,
    id::{AgentId, TaskId},
    time::Timestamp,
};

/// The path segment that names the one global budget (`/api/budgets/global/_global`): a
/// path segment cannot be empty, and the reference stores the global row's id as `''`.
pub const GLOBAL_SCOPE_ID: &str = "_global";
/// No budget is larger: a typo of many digits is refused rather than kept.
pub const DAILY_BUDGET_MAX_USD: f64 = 1_000_000_000.0;
/// `GET /api/budgets/refusals`: the default and the largest page (the reference's).
pub const REFUSALS_LIMIT_DEFAULT: i64 = 50;
pub const REFUSALS_LIMIT_MAX: i64 = 500;

/// An amount in US dollars. Amounts are ceilings a person typed (finite, checked by
/// [`DailyBudgetUsd::parse`]) or sums of recorded costs, never NaN, so equality is total.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize, utoipa::ToSchema)]
#[serde(transparent)]
pub struct Usd(pub f64);

impl Eq for Usd {}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum BudgetScope {
    Global,
    Agent,
}

impl BudgetScope {
    pub fn as_str(&self) -> &'static str {
        match self {
            BudgetScope::Global => "global",
            BudgetScope::Agent => "agent",
        }
    }

    pub fn parse(text: &str) -> Result<Self, Invalid> {
        match text {
            "global" => Ok(BudgetScope::Global),
            "agent" => Ok(BudgetScope::Agent),
            other => Err(Invalid(format!(
                "budget scope must be 'global' or 'agent', not '{}'",
                other.chars().take(40).collect::<String>()
            ))),
        }
    }
}

/// Which budget: `global` with the placeholder id, or one agent's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BudgetKey {
    Global,
    Agent(AgentId),
}

impl BudgetKey {
    /// From the route's two path segments.
    pub fn parse(scope: &str, scope_id: &str) -> Result<Self, Invalid> {
        match BudgetScope::parse(scope)? {
            BudgetScope::Global if scope_id == GLOBAL_SCOPE_ID => Ok(BudgetKey::Global),
            BudgetScope::Global => Err(Invalid(format!(
                "the global budget's id is '{GLOBAL_SCOPE_ID}': use /api/budgets/global/{GLOBAL_SCOPE_ID}"
            ))),
            BudgetScope::Agent => AgentId::parse(scope_id)
                .map(BudgetKey::Agent)
                .map_err(|_| Invalid("an agent budget's id is the agent's id (a UUID)".into())),
        }
    }

    pub fn scope(&self) -> BudgetScope {
        match self {
            BudgetKey::Global => BudgetScope::Global,
            BudgetKey::Agent(_) => BudgetScope::Agent,
        }
    }

    /// The id as stored and shown: `''` for the global budget (the reference's).
    pub fn scope_id(&self) -> String {
        match self {
            BudgetKey::Global => String::new(),
            BudgetKey::Agent(agent) => agent.to_string(),
        }
    }
}

impl BudgetKey {
    /// The event log's record of setting (`Some` new ceiling) or removing (`None`) this
    /// budget, whose ceiling was `before`.
    pub fn change_event(&self, before: Option<f64>, after: Option<f64>) -> crate::event::NewEvent {
        let event_type = if after.is_some() {
            crate::event::EventType::BudgetSet
        } else {
            crate::event::EventType::BudgetRemoved
        };
        let agent = match self {
            BudgetKey::Global => None,
            BudgetKey::Agent(agent) => Some(*agent),
        };
        crate::event::NewEvent {
            metadata: Some(serde_json::json!({"scope": self.scope().as_str()})),
            ..crate::event::NewEvent::change(
                event_type,
                agent,
                None,
                before.map(|usd| usd.to_string()).as_deref(),
                after.map(|usd| usd.to_string()).as_deref(),
            )
        }
    }
}

/// A daily ceiling: finite, not negative, at most [`DAILY_BUDGET_MAX_USD`]. Zero stops all
/// new work of its scope.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DailyBudgetUsd(f64);

impl DailyBudgetUsd {
    pub fn parse(value: f64) -> Result<Self, Invalid> {
        if value.is_finite() && (0.0..=DAILY_BUDGET_MAX_USD).contains(&value) {
            Ok(DailyBudgetUsd(value))
        } else {
            Err(Invalid(format!("dailyBudgetUsd must be a number from 0 to {DAILY_BUDGET_MAX_USD}")))
        }
    }

    pub fn get(&self) -> f64 {
        self.0
    }
}

/// A budget as stored, with the reference's epoch-millisecond stamps.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Budget {
    pub scope: BudgetScope,
    /// `''` for the global budget, else the agent's id.
    pub scope_id: String,
    pub daily_budget_usd: f64,
    /// Epoch milliseconds.
    pub created_at: i64,
    /// Epoch milliseconds.
    pub last_updated_at: i64,
    /// Ours: what its scope spent so far today (UTC), from the session costs. Set by the
    /// hub when it answers; `None` as stored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spent_today_usd: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum RefusalCause {
    Global,
    Agent,
}

impl RefusalCause {
    pub fn as_str(&self) -> &'static str {
        match self {
            RefusalCause::Global => "global",
            RefusalCause::Agent => "agent",
        }
    }

    pub fn parse(text: &str) -> Result<Self, Invalid> {
        match text {
            "global" => Ok(RefusalCause::Global),
            "agent" => Ok(RefusalCause::Agent),
            other => Err(Invalid(format!("unknown budget refusal cause '{other}'"))),
        }
    }
}

/// The ceilings that apply to one agent now and what was spent against them today.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct DaySpend {
    pub agent_budget: Option<f64>,
    pub agent_spend: f64,
    pub global_budget: Option<f64>,
    pub global_spend: f64,
}

impl DaySpend {
    /// The reference's order: a reached global ceiling halts everyone, so it is named
    /// first; a ceiling is reached when the day's spend is at or above it.
    pub fn refusal_cause(&self) -> Option<RefusalCause> {
        let reached = |budget: Option<f64>, spend: f64| budget.is_some_and(|budget| spend >= budget);
        if reached(self.global_budget, self.global_spend) {
            Some(RefusalCause::Global)
        } else if reached(self.agent_budget, self.agent_spend) {
            Some(RefusalCause::Agent)
        } else {
            None
        }
    }

    /// The `budget_refused` trigger for this spend, when a ceiling is reached: the figures of
    /// every budget that is set (the reference sends the cause's only; more is compatible).
    pub fn refused(&self, day: &UtcDay) -> Option<BudgetRefused> {
        let cause = self.refusal_cause()?;
        let agent_set = self.agent_budget.is_some();
        let global_set = self.global_budget.is_some();
        Some(BudgetRefused {
            cause,
            agent_spend: agent_set.then_some(Usd(self.agent_spend)),
            agent_budget: self.agent_budget.map(Usd),
            global_spend: global_set.then_some(Usd(self.global_spend)),
            global_budget: self.global_budget.map(Usd),
            reset_at: day.end.to_string(),
        })
    }
}

/// What a refused poll hands the runner (`{type: "budget_refused", ...}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BudgetRefused {
    pub cause: RefusalCause,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_spend: Option<Usd>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_budget: Option<Usd>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub global_spend: Option<Usd>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub global_budget: Option<Usd>,
    /// The next UTC midnight, when the day's spend starts again from zero.
    pub reset_at: String,
}

/// A refusal as recorded (the reference's `BudgetRefusalNotification`), once per agent,
/// task and UTC day.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BudgetRefusal {
    pub task_id: TaskId,
    /// `YYYY-MM-DD`, UTC.
    pub date: String,
    pub agent_id: AgentId,
    pub cause: RefusalCause,
    pub agent_spend_usd: Option<f64>,
    pub agent_budget_usd: Option<f64>,
    pub global_spend_usd: Option<f64>,
    pub global_budget_usd: Option<f64>,
    /// Epoch milliseconds.
    pub created_at: i64,
}

impl BudgetRefusal {
    pub fn new(
        agent_id: AgentId,
        task_id: TaskId,
        refused: &BudgetRefused,
        day: &UtcDay,
        now: Timestamp,
    ) -> Self {
        BudgetRefusal {
            task_id,
            date: day.date.clone(),
            agent_id,
            cause: refused.cause,
            agent_spend_usd: refused.agent_spend.map(|usd| usd.0),
            agent_budget_usd: refused.agent_budget.map(|usd| usd.0),
            global_spend_usd: refused.global_spend.map(|usd| usd.0),
            global_budget_usd: refused.global_budget.map(|usd| usd.0),
            created_at: now.unix_millis(),
        }
    }
}

/// The UTC calendar day holding an instant: spend counts the session costs recorded in
/// `[start, end)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UtcDay {
    pub start: Timestamp,
    pub end: Timestamp,
    /// `YYYY-MM-DD`.
    pub date: String,
}

impl UtcDay {
    pub fn of(now: Timestamp) -> Self {
        let date = now.datetime().date_naive();
        let midnight = |day: chrono::NaiveDate| {
            Timestamp::from_datetime(Utc.from_utc_datetime(&day.and_time(NaiveTime::MIN)))
        };
        let next = date.checked_add_days(Days::new(1)).unwrap_or(date);
        UtcDay { start: midnight(date), end: midnight(next), date: date.format("%Y-%m-%d").to_string() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_day_runs_from_midnight_to_midnight_utc() {
        let late = Timestamp::from_unix_millis(1_767_225_599_999).unwrap(); // 2025-12-31T23:59:59.999Z
        let day = UtcDay::of(late);
        assert_eq!(day.date, "2025-12-31");
        assert_eq!(day.start.to_string(), "2025-12-31T00:00:00.000Z");
        assert_eq!(day.end.to_string(), "2026-01-01T00:00:00.000Z");
        assert_eq!(UtcDay::of(day.end).date, "2026-01-01", "midnight belongs to the new day");
    }

    #[test]
    fn the_global_ceiling_is_named_first_and_a_ceiling_is_reached_at_equality() {
        let check =
            |spend: DaySpend, expected: Option<RefusalCause>| assert_eq!(spend.refusal_cause(), expected);
        check(DaySpend::default(), None);
        check(DaySpend { agent_budget: Some(1.0), agent_spend: 0.99, ..DaySpend::default() }, None);
        check(
            DaySpend { agent_budget: Some(1.0), agent_spend: 1.0, ..DaySpend::default() },
            Some(RefusalCause::Agent),
        );
        check(
            DaySpend {
                agent_budget: Some(1.0),
                agent_spend: 5.0,
                global_budget: Some(0.0),
                global_spend: 0.0,
            },
            Some(RefusalCause::Global),
        );
        check(
            DaySpend { agent_budget: None, agent_spend: 9.0, global_budget: Some(10.0), global_spend: 9.0 },
            None,
        );
    }

    #[test]
    fn keys_and_amounts_are_checked() {
        assert_eq!(BudgetKey::parse("global", GLOBAL_SCOPE_ID), Ok(BudgetKey::Global));
        assert!(BudgetKey::parse("global", "anything").is_err());
        assert!(BudgetKey::parse("user", "someone").is_err(), "user budgets are not kept");
        assert!(BudgetKey::parse("agent", "not-a-uuid").is_err());
        let agent = AgentId::new_v7();
        assert_eq!(BudgetKey::parse("agent", &agent.to_string()), Ok(BudgetKey::Agent(agent)));
        assert_eq!(BudgetKey::Global.scope_id(), "");
        for bad in [-0.01, f64::NAN, f64::INFINITY, DAILY_BUDGET_MAX_USD * 2.0] {
            assert!(DailyBudgetUsd::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(DailyBudgetUsd::parse(0.0).map(|usd| usd.get()), Ok(0.0));
    }

    #[test]
    fn a_refusal_carries_the_figures_of_the_budgets_set() {
        let day = UtcDay::of(Timestamp::from_unix_millis(0).unwrap());
        let spend =
            DaySpend { agent_budget: Some(2.0), agent_spend: 2.5, global_budget: None, global_spend: 7.0 };
        let refused = spend.refused(&day).unwrap();
        let json = serde_json::to_value(&refused).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"cause": "agent", "agentSpend": 2.5, "agentBudget": 2.0,
                               "resetAt": "1970-01-02T00:00:00.000Z"})
        );
        let trigger = serde_json::to_value(crate::poll::Trigger::BudgetRefused(refused)).unwrap();
        assert_eq!(trigger["type"], "budget_refused");
        assert_eq!(trigger["cause"], "agent");
    }
}
