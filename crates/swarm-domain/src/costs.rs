//! What the crew spent (issue 49): the session costs summed per agent, per epic and per
//! UTC day, for today and the last 7 days, read by the overview and the agent and epic
//! pages next to the daily budgets.

use serde::Serialize;
use utoipa::ToSchema;

use crate::{
    budget::UtcDay,
    id::{AgentId, EpicId},
    time::Timestamp,
};

/// How many UTC days the summary covers, today included.
pub const COST_DAYS: u64 = 7;

/// The session costs of one agent on tasks of one epic (or of none) in a window, as the
/// store sums them.
#[derive(Debug, Clone, PartialEq)]
pub struct CostTotal {
    pub agent_id: AgentId,
    /// `None`: sessions of tasks in no epic, or of no task.
    pub epic_id: Option<EpicId>,
    pub cost_usd: f64,
    pub sessions: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DayCost {
    /// `YYYY-MM-DD`, UTC.
    pub date: String,
    pub cost_usd: f64,
    pub sessions: i64,
}

/// One agent's or one epic's spend.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScopeCost {
    /// The agent or epic; `null` among epics: sessions of tasks in no epic.
    #[schema(value_type = Option<String>, format = Uuid)]
    pub id: Option<String>,
    pub today_usd: f64,
    pub last7_days_usd: f64,
    pub sessions: i64,
}

/// `GET /api/costs`: every figure sums the same session costs, so the agents' figures,
/// the epics' (with the `null` one) and the days' each add up to the totals.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CostSummary {
    /// Today's date, UTC (`YYYY-MM-DD`).
    pub today: String,
    pub today_usd: f64,
    pub last7_days_usd: f64,
    /// The last 7 UTC days, oldest first, today last.
    pub days: Vec<DayCost>,
    /// Highest 7-day spend first.
    pub agents: Vec<ScopeCost>,
    /// Highest 7-day spend first.
    pub epics: Vec<ScopeCost>,
}

/// The UTC days the summary covers, oldest first, the one holding `now` last.
pub fn cost_days(now: Timestamp) -> Vec<UtcDay> {
    let mut days = vec![UtcDay::of(now)];
    while (days.len() as u64) < COST_DAYS {
        let before = days[0].start.plus_millis(-1);
        days.insert(0, UtcDay::of(before));
    }
    days
}

impl CostSummary {
    /// From each day's totals, oldest first, today last (as [`cost_days`] lists them).
    pub fn from_days(days: &[(UtcDay, Vec<CostTotal>)]) -> CostSummary {
        let mut agents: Vec<ScopeCost> = Vec::new();
        let mut epics: Vec<ScopeCost> = Vec::new();
        let mut day_costs = Vec::with_capacity(days.len());
        let last = days.len().saturating_sub(1);
        for (index, (day, totals)) in days.iter().enumerate() {
            let is_today = index == last;
            let mut day_cost = DayCost { date: day.date.clone(), cost_usd: 0.0, sessions: 0 };
            for total in totals {
                day_cost.cost_usd += total.cost_usd;
                day_cost.sessions += total.sessions;
                add(&mut agents, Some(total.agent_id.to_string()), total, is_today);
                add(&mut epics, total.epic_id.map(|id| id.to_string()), total, is_today);
            }
            day_costs.push(day_cost);
        }
        for list in [&mut agents, &mut epics] {
            list.sort_by(|a, b| b.last7_days_usd.total_cmp(&a.last7_days_usd).then_with(|| a.id.cmp(&b.id)));
        }
        CostSummary {
            today: days.last().map(|(day, _)| day.date.clone()).unwrap_or_default(),
            today_usd: day_costs.last().map_or(0.0, |day| day.cost_usd),
            last7_days_usd: day_costs.iter().map(|day| day.cost_usd).sum(),
            days: day_costs,
            agents,
            epics,
        }
    }
}

fn add(list: &mut Vec<ScopeCost>, id: Option<String>, total: &CostTotal, is_today: bool) {
    let index = match list.iter().position(|scope| scope.id == id) {
        Some(index) => index,
        None => {
            list.push(ScopeCost { id, today_usd: 0.0, last7_days_usd: 0.0, sessions: 0 });
            list.len() - 1
        }
    };
    let scope = &mut list[index];
    scope.last7_days_usd += total.cost_usd;
    scope.sessions += total.sessions;
    if is_today {
        scope.today_usd += total.cost_usd;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn total(agent: AgentId, epic: Option<EpicId>, cost_usd: f64) -> CostTotal {
        CostTotal { agent_id: agent, epic_id: epic, cost_usd, sessions: 1 }
    }

    #[test]
    fn seven_utc_days_end_today() {
        let now = Timestamp::from_unix_millis(1_767_225_599_999).unwrap(); // 2025-12-31T23:59:59.999Z
        let days: Vec<String> = cost_days(now).into_iter().map(|day| day.date).collect();
        assert_eq!(days.first().unwrap(), "2025-12-25");
        assert_eq!(days.last().unwrap(), "2025-12-31");
        assert_eq!(days.len(), 7);
    }

    #[test]
    fn agents_epics_and_days_add_up_to_the_totals() {
        let (ada, bob, epic) = (AgentId::new_v7(), AgentId::new_v7(), EpicId::new_v7());
        let now = Timestamp::from_unix_millis(1_767_225_599_999).unwrap();
        let mut days: Vec<(UtcDay, Vec<CostTotal>)> =
            cost_days(now).into_iter().map(|d| (d, vec![])).collect();
        days[0].1 = vec![total(ada, Some(epic), 1.0)];
        days[6].1 = vec![total(ada, None, 0.25), total(bob, Some(epic), 0.5)];
        let summary = CostSummary::from_days(&days);
        assert_eq!((summary.today_usd, summary.last7_days_usd), (0.75, 1.75));
        assert_eq!(summary.agents[0].id, Some(ada.to_string()));
        assert_eq!((summary.agents[0].today_usd, summary.agents[0].last7_days_usd), (0.25, 1.25));
        assert_eq!(summary.epics[0].id, Some(epic.to_string()));
        assert_eq!(summary.epics[0].last7_days_usd, 1.5);
        assert_eq!(summary.epics[1].id, None);
        assert_eq!(summary.days.iter().map(|day| day.cost_usd).sum::<f64>(), 1.75);
    }
}
