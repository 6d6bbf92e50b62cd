//! The harnesses' command lines and output parsers, from their data.

use std::path::PathBuf;

use super::*;

fn run<'a>(agent_args: &'a [String]) -> Invocation<'a> {
    Invocation { prompt: "/work-on-task 1", system_prompt: "be good", agent_args, resume: None, model: None }
}

#[test]
fn claude_command_line_is_the_references() {
    let extra = vec!["--model".to_string(), "opus".to_string()];
    let (program, args) = Harness::claude().command_line(&run(&extra));
    assert_eq!(program, PathBuf::from("claude"));
    assert_eq!(
        args,
        [
            "--verbose",
            "--output-format",
            "stream-json",
            "--dangerously-skip-permissions",
            "--permission-mode",
            "bypassPermissions",
            "-p",
            "/work-on-task 1",
            "--model",
            "opus",
            "--append-system-prompt",
            "be good"
        ]
    );
}

#[test]
fn a_program_gets_the_prompt_last() {
    let extra = vec!["stand-in-agent".to_string()];
    let harness = Harness::program("/bin/swarm", Vec::new());
    let (program, args) = harness.command_line(&run(&extra));
    assert_eq!(program, PathBuf::from("/bin/swarm"));
    assert_eq!(args, ["stand-in-agent", "/work-on-task 1"]);
    assert_eq!(harness.name(), "swarm");
    let (_, codex) = Harness::codex().command_line(&run(&[]));
    assert_eq!(
        codex[..4],
        ["exec", "--json", "--dangerously-bypass-approvals-and-sandbox", "--skip-git-repo-check"]
    );
    let prompt = codex.last().unwrap();
    assert!(
        prompt.starts_with("be good\n\n# Work on swarm task 1\n"),
        "Codex gets the instructions: {prompt}"
    );
    let resume = Invocation { resume: Some("th-1"), ..run(&[]) };
    let (_, codex) = Harness::codex().command_line(&resume);
    assert_eq!(codex[..2], ["exec", "resume"]);
    assert_eq!(codex[codex.len() - 2], "th-1");
    assert!(codex.last().unwrap().starts_with("# Work on swarm task 1\n"), "{codex:?}");
}

#[test]
fn a_command_line_is_split_into_shell_words() {
    let harness = Harness::from_command_line(r#"python3 'my agent.py' --name "a b" \\x"#).unwrap();
    let extra = vec!["--fast".to_string()];
    let (program, args) = harness.command_line(&run(&extra));
    assert_eq!(program, PathBuf::from("python3"));
    assert_eq!(args, ["my agent.py", "--name", "a b", "\\x", "--fast", "/work-on-task 1"]);
    assert_eq!(harness.name(), "python3");

    for bad in ["python3 'agent.py", "run \"half", "", "   "] {
        let err = Harness::from_command_line(bad).unwrap_err().to_string();
        assert!(err.contains("--harness-cmd") && err.contains("not a valid command line"), "{err}");
    }
}

#[test]
fn reads_claude_stream_json() {
    let mut report = RunReport::default();
    report.observe(r#"{"type":"system","subtype":"init","session_id":"s-1","model":"claude-x"}"#);
    report.observe("not json at all");
    report.observe(r#"{"type":"assistant","message":{}}"#);
    report.observe(
        r#"{"type":"result","subtype":"success","is_error":false,"result":"done","session_id":"s-1",
            "total_cost_usd":0.25,"duration_ms":1200,"num_turns":3,
            "usage":{"input_tokens":10,"output_tokens":20,"cache_read_input_tokens":5,"cache_creation_input_tokens":7}}"#
            .replace('\n', " ")
            .as_str(),
    );
    assert_eq!(
        report,
        RunReport {
            session_id: Some("s-1".into()),
            model: Some("claude-x".into()),
            cost_usd: Some(0.25),
            input_tokens: Some(10),
            output_tokens: Some(20),
            cache_read_tokens: Some(5),
            cache_write_tokens: Some(7),
            duration_ms: Some(1200),
            num_turns: Some(3),
            is_error: false,
            result: Some("done".into()),
            activity: true,
            last_text: None,
            error_text: None,
            waiting_for_model: None,
            ..RunReport::default()
        }
    );
    assert!(report.has_usage());
}

#[test]
fn a_cli_that_only_reports_its_own_failure_did_nothing() {
    let mut claude = RunReport::default();
    claude.observe(r#"{"type":"system","subtype":"init","session_id":"s"}"#);
    claude.observe(
        r#"{"type":"assistant","message":{"model":"<synthetic>","content":[{"type":"text","text":"Invalid API key"}]}}"#,
    );
    claude.observe(r#"{"type":"result","is_error":true,"result":"Invalid API key"}"#);
    assert!(!claude.activity && claude.is_error);
    assert_eq!(claude.error_text.as_deref(), Some("Invalid API key"));
    assert_eq!(claude.last_text.as_deref(), Some("Invalid API key"));
    claude.observe(
        r#"{"type":"assistant","message":{"model":"claude-x","content":[{"type":"text","text":"On it"}]}}"#,
    );
    assert!(claude.activity);
    assert_eq!(claude.last_text.as_deref(), Some("On it"));

    let mut codex = RunReport::default();
    codex.observe(r#"{"type":"thread.started","thread_id":"t"}"#);
    codex.observe(r#"{"type":"error","message":"401 Unauthorized"}"#);
    codex.observe(r#"{"type":"turn.failed","error":{"message":"401"}}"#);
    assert!(!codex.activity);
    assert_eq!(codex.error_text.as_deref(), Some("401"));
    codex.observe(r#"{"type":"item.started","item":{"id":"1","type":"mcp_tool_call"}}"#);
    assert!(codex.activity);

    let mut unreachable = RunReport::default();
    unreachable.observe(r#"{"type":"error","message":"Reconnecting... 2/5 (Connection failed)"}"#);
    assert_eq!(unreachable.waiting_for_model.as_deref(), Some("Reconnecting... 2/5 (Connection failed)"));
    unreachable
        .observe(r#"{"type":"item.completed","item":{"id":"i","type":"agent_message","text":"back"}}"#);
    assert_eq!(unreachable.waiting_for_model, None, "the model answered again");
    unreachable.observe(
        r#"{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"error_status":529}"#,
    );
    assert_eq!(unreachable.waiting_for_model.as_deref(), Some("API retry 1 of 10 (status 529)"));

    let mut program = RunReport::default();
    program.observe("   ");
    assert!(!program.activity);
    program.observe("working on it");
    assert!(program.activity);
}

#[test]
fn reads_codex_jsonl_whose_counts_are_the_threads() {
    let mut report = RunReport::default();
    for line in [
        r#"{"type":"thread.started","thread_id":"th-9"}"#,
        r#"{"type":"turn.started"}"#,
        r#"{"type":"item.completed","item":{"id":"i","type":"agent_message","text":"all done"}}"#,
        r#"{"type":"turn.completed","usage":{"input_tokens":100,"cached_input_tokens":40,"output_tokens":9}}"#,
        r#"{"type":"turn.completed","usage":{"input_tokens":101,"cached_input_tokens":40,"output_tokens":10}}"#,
    ] {
        report.observe(line);
    }
    assert_eq!(report.session_id.as_deref(), Some("th-9"));
    assert_eq!(
        (report.input_tokens, report.cache_read_tokens, report.output_tokens),
        (Some(101), Some(40), Some(10))
    );
    assert_eq!(report.num_turns, Some(2));
    // A resumed thread: what it counted before this run is taken away.
    let mut resumed = report.clone();
    resumed.subtract(&TokenCounts { input: 60, cached: 40, output: 4 });
    assert_eq!(
        (resumed.input_tokens, resumed.cache_read_tokens, resumed.output_tokens),
        (Some(41), Some(0), Some(6))
    );
    assert_eq!(report.result.as_deref(), Some("all done"));
    assert!(!report.is_error && report.cost_usd.is_none() && report.has_usage());
    report.observe(r#"{"type":"turn.failed","error":{"message":"boom"}}"#);
    assert!(report.is_error);
}

fn with_model<'a>(model: &'a str) -> Invocation<'a> {
    Invocation { model: Some(model), ..run(&[]) }
}

#[test]
fn every_built_in_harness_loads_and_takes_a_model() {
    for name in Harness::built_in_names() {
        let harness = Harness::built_in(name).unwrap();
        assert_eq!(harness.name(), name);
        assert!(harness.can_choose_model() && harness.can_resume(), "{name}");
        let (_, args) = harness.command_line(&with_model("model-x"));
        assert!(args.iter().any(|arg| arg == "model-x" || arg.ends_with("/model-x")), "{name}: {args:?}");
        let (_, args) = harness.command_line(&run(&[]));
        assert!(!args.iter().any(|arg| arg.contains("model")), "{name}: {args:?}");
    }
    let (_, claude) = Harness::claude().command_line(&with_model("opus"));
    assert_eq!(claude[8..10], ["--model", "opus"]);
    let (_, codex) = Harness::codex().command_line(&with_model("gpt-x"));
    assert_eq!(codex[4..6], ["--model", "gpt-x"]);
    let program = Harness::program("agent", Vec::new());
    assert!(program.can_choose_model() && program.can_resume() && !program.supports_hooks());
    assert!(Harness::claude().supports_hooks() && !Harness::codex().supports_hooks());
}

#[test]
fn a_harness_file_adds_a_cli_and_a_users_file_wins_over_a_built_in() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("mine.toml"),
        "program = 'my-agent'\nargs = ['--sys', '{system_prompt}', '{prompt}']\noutput = 'text'\n",
    )
    .unwrap();
    let mine = Harness::named("mine", Some(dir.path())).unwrap();
    assert_eq!(mine.name(), "mine");
    assert_eq!(mine.output(), StreamFormat::Text);
    assert!(!mine.can_resume() && !mine.can_choose_model());
    let (program, args) = mine.command_line(&run(&[]));
    assert_eq!(
        (program, args),
        (PathBuf::from("my-agent"), vec!["--sys".into(), "be good".into(), "/work-on-task 1".into()])
    );
    assert_eq!(Harness::from_file(&dir.path().join("mine.toml")).unwrap(), mine);

    assert_eq!(Harness::named("codex", Some(dir.path())).unwrap(), Harness::codex());
    std::fs::write(dir.path().join("codex.toml"), "program = '/opt/codex'\nargs = ['{prompt}']\n").unwrap();
    assert_eq!(
        Harness::named("codex", Some(dir.path())).unwrap().program_path(),
        PathBuf::from("/opt/codex")
    );

    let err = Harness::named("nope", Some(dir.path())).unwrap_err().to_string();
    assert!(
        err.contains("nope.toml") && err.contains("claude, codex") && err.contains("Adding an agent CLI"),
        "{err}"
    );
    std::fs::write(dir.path().join("bad.toml"), "program = 'x'\nargs = ['{promt}']\n").unwrap();
    let err = Harness::named("bad", Some(dir.path())).unwrap_err().to_string();
    assert!(err.contains("bad.toml") && err.contains("{promt}"), "{err}");
}
