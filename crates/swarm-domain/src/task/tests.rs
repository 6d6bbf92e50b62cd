use super::*;

fn draft(task: &str) -> TaskDraft {
    TaskDraft { task: task.to_string(), ..TaskDraft::default() }
}

#[test]
fn initial_status_follows_the_contract() {
    let agent = AgentId::new_v7();
    let check = |draft: TaskDraft, expected: TaskStatus| {
        assert_eq!(NewTask::parse(draft, None).unwrap().status, expected);
    };
    check(draft("pool"), TaskStatus::Unassigned);
    check(TaskDraft { agent_id: Some(agent), ..draft("assigned") }, TaskStatus::Pending);
    check(TaskDraft { offered_to: Some(agent), ..draft("offered") }, TaskStatus::Offered);
    check(TaskDraft { backlog: true, ..draft("later") }, TaskStatus::Backlog);
}

#[test]
fn rejects_bad_drafts() {
    let agent = AgentId::new_v7();
    let check = |draft: TaskDraft| assert!(NewTask::parse(draft, None).is_err());
    check(draft("  "));
    check(draft("nul \0 inside"));
    check(TaskDraft { tags: vec!["a\0".into()], ..draft("x") });
    check(TaskDraft { priority: Some(101), ..draft("x") });
    check(TaskDraft { priority: Some(-1), ..draft("x") });
    check(TaskDraft { agent_id: Some(agent), offered_to: Some(agent), ..draft("x") });
    check(TaskDraft { backlog: true, agent_id: Some(agent), ..draft("x") });
    check(TaskDraft { source: Some("has space".into()), ..draft("x") });
}

#[test]
fn finished_statuses_are_never_a_source() {
    let agent = AgentId::new_v7();
    let actions = [
        TaskAction::Claim { agent },
        TaskAction::Release { agent },
        TaskAction::Accept { agent },
        TaskAction::Reject { agent, reason: None },
        TaskAction::Start { agent },
        TaskAction::Pause { agent },
        TaskAction::Resume { agent },
        TaskAction::Finish { assignee: None, outcome: FinishOutcome::Completed { output: None } },
        TaskAction::Cancel { reason: None, unstarted_only: false },
        TaskAction::Cancel { reason: None, unstarted_only: true },
        TaskAction::ToBacklog,
        TaskAction::FromBacklog,
    ];
    for action in actions {
        let change = action.change();
        assert!(
            change.from.iter().all(|s| !s.is_finished()),
            "{} may leave a finished status",
            action.name()
        );
    }
}

#[test]
fn an_unstarted_only_cancel_leaves_started_work_alone() {
    let cancel = |unstarted_only| TaskAction::Cancel { reason: None, unstarted_only }.change().from;
    for started in [TaskStatus::InProgress, TaskStatus::Paused] {
        assert!(cancel(false).contains(&started), "an operator's cancel stops {started}");
        assert!(!cancel(true).contains(&started), "the inbox's cancel refuses {started}");
    }
    for waiting in TaskStatus::EDITABLE {
        assert!(cancel(true).contains(&waiting), "the inbox may withdraw a {waiting} task");
    }
}

#[test]
fn status_names_round_trip() {
    for status in TaskStatus::ALL {
        assert_eq!(TaskStatus::parse(status.as_str()).unwrap(), status);
        let json = serde_json::to_string(&status).unwrap();
        assert_eq!(json, format!("\"{}\"", status.as_str()));
    }
}
