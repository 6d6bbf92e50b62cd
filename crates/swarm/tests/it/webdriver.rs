//! A minimal W3C WebDriver client over reqwest, driving Debian's `chromium` through its
//! `chromedriver`: the few commands the dashboard tests need (a session, go to a page,
//! run a script, find, click and type into an element, a screenshot), each one JSON
//! request.
//!
//! Why not `fantoccini`, the kept WebDriver crate: even without its TLS features it adds 29
//! packages to the build (Mozilla's `webdriver` crate with `time`, `cookie` twice, ICU's
//! text segmenter and its data, and second, older copies of `http`, `thiserror` and ICU's
//! collections) for these ten requests over the reqwest client the tests already have.
//!
//! Without chromedriver and chromium the browser tests fail, naming what to install.

use std::{
    net::TcpListener,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use base64::{Engine, engine::general_purpose::STANDARD};
use serde_json::{Value, json};

const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";
const WITHIN: Duration = Duration::from_secs(30);

/// A running chromedriver and one headless Chromium session.
pub struct Browser {
    driver: Child,
    base: String,
    http: reqwest::Client,
}

impl Browser {
    /// A headless Chromium. A machine without one fails the test, naming what to
    /// install: a browser test never passes by not running.
    pub async fn start() -> Browser {
        let (Some(driver), Some(chromium)) = (find_program("chromedriver"), find_program("chromium")) else {
            panic!(
                "browser tests need chromium and chromedriver on PATH: run scripts/test, which \
                 installs them, or apt-get install chromium chromium-driver"
            );
        };
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new(driver)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let mut browser =
            Browser { driver: child, base: format!("http://127.0.0.1:{port}"), http: reqwest::Client::new() };
        let deadline = Instant::now() + WITHIN;
        loop {
            let ready = browser.http.get(format!("{}/status", browser.base)).send().await;
            if let Ok(response) = ready
                && let Ok(status) = response.json::<Value>().await
                && status["value"]["ready"] == json!(true)
            {
                break;
            }
            assert!(Instant::now() < deadline, "chromedriver did not become ready");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                // Root in CI needs --no-sandbox; a fixed size makes screenshots comparable.
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         "--window-size=1400,1800", "--no-first-run", "--no-default-browser-check"],
            },
        }}});
        let session = browser.command(reqwest::Method::POST, "/session", Some(capabilities)).await;
        let id = session["sessionId"].as_str().expect("a WebDriver session id").to_string();
        browser.base = format!("{}/session/{id}", browser.base);
        browser
    }

    async fn command(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        self.try_command(method.clone(), path, body)
            .await
            .unwrap_or_else(|error| panic!("WebDriver {method} {path}: {error}"))
    }

    /// The command's value, or WebDriver's error code and message.
    async fn try_command(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, String> {
        let mut request = self.http.request(method, format!("{}{path}", self.base));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.map_err(|err| err.to_string())?;
        let status = response.status();
        let answer: Value = response.json().await.map_err(|err| err.to_string())?;
        if !status.is_success() {
            return Err(format!("{status} {}: {}", answer["value"]["error"], answer["value"]["message"]));
        }
        Ok(answer["value"].clone())
    }

    /// Find `css` and act on it; a live re-render between the two makes the element
    /// stale, so find it again.
    async fn on_element(&self, css: &str, action: &str, body: Value) {
        self.wait_for(&format!("{css} to be shown"), &format!("return !!document.querySelector({css:?})"))
            .await;
        let mut last_error = String::new();
        for _ in 0..50 {
            // A live re-render may also remove the element between the wait and the
            // lookup: look again, as for a stale one.
            let found = self
                .try_command(
                    reqwest::Method::POST,
                    "/element",
                    Some(json!({"using": "css selector", "value": css})),
                )
                .await;
            let element = match found {
                Ok(found) => found[ELEMENT_KEY].as_str().unwrap_or_default().to_string(),
                Err(error) if error.contains("no such element") => {
                    last_error = error;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
                Err(error) => panic!("WebDriver find {css}: {error}"),
            };
            match self
                .try_command(
                    reqwest::Method::POST,
                    &format!("/element/{element}/{action}"),
                    Some(body.clone()),
                )
                .await
            {
                Ok(_) => return,
                Err(error) if error.contains("stale element") => last_error = error,
                Err(error) => panic!("WebDriver {action} on {css}: {error}"),
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("WebDriver {action} on {css}: {last_error}");
    }

    pub async fn goto(&self, url: &str) {
        self.command(reqwest::Method::POST, "/url", Some(json!({"url": url}))).await;
    }

    /// Run JavaScript in the page and return what it returns.
    pub async fn script(&self, script: &str) -> Value {
        self.command(reqwest::Method::POST, "/execute/sync", Some(json!({"script": script, "args": []})))
            .await
    }

    /// Wait until `css` matches, then click it as a user would.
    pub async fn click(&self, css: &str) {
        self.on_element(css, "click", json!({})).await;
    }

    /// Wait until `css` matches, clear it and type `text` into it.
    pub async fn type_into(&self, css: &str, text: &str) {
        self.on_element(css, "clear", json!({})).await;
        self.on_element(css, "value", json!({"text": text})).await;
    }

    /// The text of the first element matching `css`, or `None`.
    pub async fn text(&self, css: &str) -> Option<String> {
        self.script(&format!("const e = document.querySelector({css:?}); return e ? e.textContent : null"))
            .await
            .as_str()
            .map(str::to_string)
    }

    /// Poll `condition` (a script body returning a truthy value) until it holds.
    pub async fn wait_for(&self, what: &str, condition: &str) -> Value {
        let deadline = Instant::now() + WITHIN;
        loop {
            let value = self.script(condition).await;
            let holds = !matches!(&value, Value::Null | Value::Bool(false))
                && value != json!("")
                && value != json!(0);
            if holds {
                return value;
            }
            if Instant::now() >= deadline {
                let body = self.text("body").await.unwrap_or_default();
                panic!("timed out waiting for {what}; the page says:\n{body}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Save a PNG of the window as `<dir>/<name>.png`.
    pub async fn screenshot(&self, dir: &Path, name: &str) -> PathBuf {
        let encoded = self.command(reqwest::Method::GET, "/screenshot", None).await;
        let png = STANDARD.decode(encoded.as_str().expect("a screenshot")).expect("a base64 screenshot");
        std::fs::create_dir_all(dir).unwrap();
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).unwrap();
        path
    }

    /// Save a PNG of the first element matching `css`, cropped to it, as `<dir>/<name>.png`.
    pub async fn screenshot_of(&self, css: &str, dir: &Path, name: &str) -> PathBuf {
        let found = self
            .command(reqwest::Method::POST, "/element", Some(json!({"using": "css selector", "value": css})))
            .await;
        let element = found[ELEMENT_KEY].as_str().expect("an element").to_string();
        let encoded =
            self.command(reqwest::Method::GET, &format!("/element/{element}/screenshot"), None).await;
        let png = STANDARD.decode(encoded.as_str().expect("a screenshot")).expect("a base64 screenshot");
        std::fs::create_dir_all(dir).unwrap();
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).unwrap();
        path
    }

    /// Lay pages out as a screen `width` × `height` CSS pixels wide would (a phone: 390 ×
    /// 844), through Chromium's DevTools: a window can be no narrower than its toolbar.
    pub async fn emulate_screen(&self, width: u32, height: u32) {
        let params = json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false});
        let body = json!({"cmd": "Emulation.setDeviceMetricsOverride", "params": params});
        self.command(reqwest::Method::POST, "/goog/cdp/execute", Some(body)).await;
    }

    /// The current tab's handle.
    pub async fn tab(&self) -> String {
        self.command(reqwest::Method::GET, "/window", None)
            .await
            .as_str()
            .expect("a window handle")
            .to_string()
    }

    /// Open a new tab of the same browser (its storage shared) and switch to it.
    pub async fn open_tab(&self) -> String {
        let opened = self.command(reqwest::Method::POST, "/window/new", Some(json!({"type": "tab"}))).await;
        let handle = opened["handle"].as_str().expect("a new tab's handle").to_string();
        self.switch_to(&handle).await;
        handle
    }

    pub async fn switch_to(&self, handle: &str) {
        self.command(reqwest::Method::POST, "/window", Some(json!({"handle": handle}))).await;
    }

    pub async fn close(mut self) {
        let _ = self.http.delete(&self.base).send().await;
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // chromedriver takes its Chromium with it.
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(name)).find(|candidate| candidate.is_file())
}
