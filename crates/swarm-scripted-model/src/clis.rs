//! Where the pinned real CLIs are, and how to point them at a [`ScriptedModel`].

use std::path::{Path, PathBuf};

use crate::ScriptedModel;

/// The environment variable Codex's scripted provider reads its key from (`env_key`).
pub const CODEX_KEY_ENV: &str = "SCRIPTED_MODEL_API_KEY";

/// The name of the Codex model provider [`codex_config`] writes.
pub const CODEX_PROVIDER: &str = "scripted";

/// The repository root (this crate lives in `crates/swarm-scripted-model`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("the workspace root exists")
}

/// Claude Code: `SWARM_CLAUDE_BIN`, else `tools/agent-clis/node_modules/.bin/claude`. The error
/// says how to install it.
pub fn claude_bin() -> Result<PathBuf, String> {
    find_bin("claude", "SWARM_CLAUDE_BIN")
}

/// Codex: `SWARM_CODEX_BIN`, else `tools/agent-clis/node_modules/.bin/codex`. The error says
/// how to install it.
pub fn codex_bin() -> Result<PathBuf, String> {
    find_bin("codex", "SWARM_CODEX_BIN")
}

/// pi (`@mariozechner/pi-coding-agent`): `SWARM_PI_BIN`, else
/// `tools/agent-clis/node_modules/.bin/pi`. The error says how to install it.
pub fn pi_bin() -> Result<PathBuf, String> {
    find_bin("pi", "SWARM_PI_BIN")
}

/// The Gemini CLI (`@google/gemini-cli`): `SWARM_GEMINI_BIN`, else
/// `tools/agent-clis/node_modules/.bin/gemini`. The error says how to install it.
pub fn gemini_bin() -> Result<PathBuf, String> {
    find_bin("gemini", "SWARM_GEMINI_BIN")
}

fn find_bin(name: &str, variable: &str) -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os(variable).filter(|path| !path.is_empty()) {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(format!("{variable}={} is not a file", path.display()))
        };
    }
    let path = workspace_root().join("tools/agent-clis/node_modules/.bin").join(name);
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "{name} is not installed at {}: run scripts/install-agent-clis (or set {variable})",
            path.display()
        ))
    }
}

/// The environment that points Claude Code at `model` and keeps it off the network, besides
/// `HOME` (give each run a fresh one) and `PATH`. Includes `IS_SANDBOX=1`, without which Claude
/// Code refuses `--dangerously-skip-permissions` as root, and `CLAUDE_CODE_MAX_RETRIES=0`:
/// by default it retries even a 401 ten times with backoff (minutes), where with 0 it ends at
/// once (exit 1, a `result` event with `is_error: true`).
pub fn claude_env(model: &ScriptedModel) -> Vec<(&'static str, String)> {
    vec![
        ("ANTHROPIC_BASE_URL", model.anthropic_base_url()),
        ("ANTHROPIC_API_KEY", "sk-scripted".to_owned()),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".to_owned()),
        ("DISABLE_AUTOUPDATER", "1".to_owned()),
        ("IS_SANDBOX", "1".to_owned()),
        ("CLAUDE_CODE_MAX_RETRIES", "0".to_owned()),
    ]
}

/// Every CLI's user settings in `home` (a fresh `HOME`), each pointed at `model`: Codex's
/// `.codex/config.toml` (its provider at `codex_base_url`: [`ScriptedModel::openai_base_url`],
/// or a model that is down), pi's, the Gemini CLI's and opencode's. Claude Code needs only its
/// environment ([`claude_env`]). `swarm connect` adds the hub's MCP server after, keeping these.
pub fn write_user_settings(home: &Path, model: &ScriptedModel, codex_base_url: &str) -> std::io::Result<()> {
    let write = |path: &str, text: String| {
        let path = home.join(path);
        std::fs::create_dir_all(path.parent().expect("a settings file is in a folder"))?;
        std::fs::write(path, text)
    };
    write(".codex/config.toml", codex_config(codex_base_url))?;
    write(".pi/agent/models.json", pi_models_json(&model.anthropic_base_url()))?;
    write(".pi/agent/settings.json", pi_settings_json())?;
    write(".gemini/settings.json", gemini_settings_json())?;
    write(".config/opencode/opencode.json", opencode_config_json(&model.anthropic_base_url()))
}

/// A `$CODEX_HOME/config.toml` that makes Codex use `base_url` (see
/// [`ScriptedModel::openai_base_url`]) through a provider named [`CODEX_PROVIDER`], its key in
/// [`CODEX_KEY_ENV`], failing at once (no retries) when the model refuses or is down. Append
/// MCP servers and other settings after it.
///
/// The model is `gpt-5.5`, a name the pinned Codex knows, for which it offers classic function
/// tools (`exec_command`, MCP namespaces). Its default model (`gpt-6.1-sol`) runs in "code
/// mode" instead: one JavaScript `exec` tool in an `additional_tools` input item, which the
/// scripted model does not play. An unknown name works too but adds an error item ("Model
/// metadata ... not found") to the `--json` output.
pub fn codex_config(base_url: &str) -> String {
    format!(
        r#"model = "gpt-5.5"
model_provider = "{CODEX_PROVIDER}"

[model_providers.{CODEX_PROVIDER}]
name = "{CODEX_PROVIDER}"
base_url = "{base_url}"
env_key = "{CODEX_KEY_ENV}"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
"#
    )
}

/// The environment variable pi's scripted provider reads its key from (`apiKey` in
/// [`pi_models_json`] names it).
pub const PI_KEY_ENV: &str = "SCRIPTED_MODEL_API_KEY";

/// The name of the pi provider [`pi_models_json`] writes; pi's `--model` takes
/// `<provider>/<model>`.
pub const PI_PROVIDER: &str = "scripted";

/// A second model of pi's scripted provider (`--model scripted/<this>`), unpriced.
pub const PI_OTHER_MODEL: &str = "scripted-model-large";

/// `$HOME/.pi/agent/models.json`: a provider named [`PI_PROVIDER`] speaking the Anthropic
/// Messages API at `base_url` (see [`ScriptedModel::anthropic_base_url`]), its key in
/// [`PI_KEY_ENV`], with two models: [`crate::MODEL_NAME`], priced like Claude Code's opus
/// ($5/M in, $25/M out) so that pi reports a cost, and [`PI_OTHER_MODEL`].
pub fn pi_models_json(base_url: &str) -> String {
    serde_json::json!({
        "providers": {
            PI_PROVIDER: {
                "baseUrl": base_url,
                "api": "anthropic-messages",
                "apiKey": PI_KEY_ENV,
                "models": [
                    {
                        "id": crate::MODEL_NAME,
                        "cost": {"input": 5, "output": 25, "cacheRead": 0.5, "cacheWrite": 6.25}
                    },
                    {"id": PI_OTHER_MODEL}
                ]
            }
        }
    })
    .to_string()
}

/// `$HOME/.pi/agent/settings.json`: the scripted model by default, and no retries, so a
/// refused key or a model that is down ends the run at once (by default pi retries a
/// connection error three times over 14 s, and its Anthropic SDK retries a 5xx twice).
pub fn pi_settings_json() -> String {
    serde_json::json!({
        "defaultProvider": PI_PROVIDER,
        "defaultModel": crate::MODEL_NAME,
        "enableInstallTelemetry": false,
        "retry": {"enabled": false, "maxRetries": 0, "provider": {"maxRetries": 0}}
    })
    .to_string()
}

/// The environment that keeps pi off the network besides the model (no update check, no
/// install ping) and gives it the scripted provider's key; with `HOME` holding
/// [`pi_models_json`] and [`pi_settings_json`] in `.pi/agent/`.
pub fn pi_env() -> Vec<(&'static str, String)> {
    vec![(PI_KEY_ENV, "sk-scripted".to_owned()), ("PI_OFFLINE", "1".to_owned())]
}

/// The environment that points the Gemini CLI at `model`, besides `HOME` (give each run a
/// fresh one, holding [`gemini_settings_json`] in `$HOME/.gemini/settings.json`) and `PATH`.
/// `GOOGLE_GEMINI_BASE_URL` alone would select the "gateway" authentication, which headless
/// runs refuse ("Invalid auth method selected"): the settings select the API key instead, and
/// the key goes to the base URL all the same. `GEMINI_CLI_TRUST_WORKSPACE=true` is
/// `--skip-trust`: an untrusted folder turns `--yolo` back into asking.
pub fn gemini_env(model: &ScriptedModel) -> Vec<(&'static str, String)> {
    vec![
        ("GOOGLE_GEMINI_BASE_URL", model.gemini_base_url()),
        ("GEMINI_API_KEY", "scripted-key".to_owned()),
        ("GEMINI_CLI_TRUST_WORKSPACE", "true".to_owned()),
    ]
}

/// `$HOME/.gemini/settings.json` for a scripted run: authentication by API key (see
/// [`gemini_env`]), the model [`crate::MODEL_NAME`] (without one Gemini routes each turn through
/// a classifier request to a small model first, `gemini-3.5-flash-lite:generateContent`), one
/// attempt per model request (by default it makes ten, backing off up to 30 seconds, on a 5xx
/// or 429), no update checks and no usage statistics.
pub fn gemini_settings_json() -> String {
    serde_json::json!({
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "model": {"name": crate::MODEL_NAME},
        "general": {"maxAttempts": 1, "enableAutoUpdate": false, "enableAutoUpdateNotification": false},
        "privacy": {"usageStatisticsEnabled": false},
    })
    .to_string()
}

/// opencode (`opencode-ai`): `SWARM_OPENCODE_BIN`, else
/// `tools/agent-clis/node_modules/.bin/opencode`. The error says how to install it.
pub fn opencode_bin() -> Result<PathBuf, String> {
    find_bin("opencode", "SWARM_OPENCODE_BIN")
}

/// The environment variable opencode's scripted provider reads its key from (`{env:...}` in
/// [`opencode_config_json`]).
pub const OPENCODE_KEY_ENV: &str = "SCRIPTED_MODEL_API_KEY";

/// The second model of [`opencode_config_json`]'s provider (the same scripted model), for a
/// run that asks for another model than the default.
pub const OPENCODE_OTHER_MODEL: &str = "scripted-model-large";

/// The opencode provider [`opencode_config_json`] writes; opencode's `--model` takes
/// `<provider>/<model>`.
pub const OPENCODE_PROVIDER: &str = "scripted";

/// `$HOME/.config/opencode/opencode.json`: a provider named [`OPENCODE_PROVIDER`] speaking the
/// Anthropic Messages API (opencode's bundled `@ai-sdk/anthropic`) at `base_url` (see
/// [`ScriptedModel::anthropic_base_url`]), with one model, [`crate::MODEL_NAME`], priced like
/// Claude Code's opus so that opencode reports a cost, as the default. No title requests
/// (opencode asks its model for a session title beside the first prompt), no sharing, no
/// updates. The project's `opencode.json` (`swarm connect`) adds the MCP server.
pub fn opencode_config_json(base_url: &str) -> String {
    serde_json::json!({
        "$schema": "https://opencode.ai/config.json",
        "model": format!("{OPENCODE_PROVIDER}/{}", crate::MODEL_NAME),
        "provider": {
            OPENCODE_PROVIDER: {
                "npm": "@ai-sdk/anthropic",
                "name": "Scripted model",
                "options": {"baseURL": format!("{base_url}/v1"), "apiKey": format!("{{env:{OPENCODE_KEY_ENV}}}")},
                "models": {
                    crate::MODEL_NAME: {
                        "name": "Scripted model",
                        "cost": {"input": 5, "output": 25, "cache_read": 0.5, "cache_write": 6.25}
                    },
                    // A second name, for a task that asks for another model than the default.
                    OPENCODE_OTHER_MODEL: {"name": "Scripted model, another name"}
                }
            }
        },
        "agent": {"title": {"disable": true}},
        "share": "disabled",
        "autoupdate": false
    })
    .to_string()
}

/// The environment that keeps opencode off the network besides the model (no models.dev
/// catalogue, no default plugins, no language servers) and gives it the scripted provider's
/// key; with `HOME` holding [`opencode_config_json`] in `.config/opencode/`.
pub fn opencode_env() -> Vec<(&'static str, String)> {
    vec![
        (OPENCODE_KEY_ENV, "sk-scripted".to_owned()),
        ("OPENCODE_DISABLE_MODELS_FETCH", "1".to_owned()),
        ("OPENCODE_DISABLE_DEFAULT_PLUGINS", "1".to_owned()),
        ("OPENCODE_DISABLE_LSP_DOWNLOAD", "1".to_owned()),
    ]
}
