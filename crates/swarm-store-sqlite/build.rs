// `sqlx::migrate!` embeds the files it found at build time; without this a new file in
// migrations/ would not trigger a rebuild and would silently be left out.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
