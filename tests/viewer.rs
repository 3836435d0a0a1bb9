//! Scratch.
#[path = "common/browser.rs"]
mod browser;

use browser::Browser;
use std::time::Duration;

#[test]
fn harness_self_check() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.html"), r#"<!doctype html><html><head>
<meta http-equiv="Content-Security-Policy" content="script-src 'self'">
<script>window.inline = 1</script>
<script src="a.js"></script></head><body>
<input id="q"><select id="s"><option value="a">a</option><option value="b">b</option></select>
<div id="list" style="height:300px;overflow:auto"><div style="height:100000px">tall</div></div>
</body></html>"#).unwrap();
    std::fs::write(dir.path().join("a.js"), r#"console.error("boom-console");
setTimeout(() => { throw new Error("boom-uncaught") }, 0);
window.typed = []; window.changed = [];
document.addEventListener('DOMContentLoaded', () => {
 document.getElementById('q').addEventListener('input', e => window.typed.push(e.target.value));
 document.getElementById('s').addEventListener('change', e => window.changed.push(e.target.value));
 document.body.dataset.ready = "1";
});"#).unwrap();
    let b = Browser::start();
    let p = b.page();
    let url = format!("file://{}/a.html", dir.path().display());
    p.goto(&url).unwrap();
    p.wait_for("document.body.dataset.ready === '1'", Duration::from_secs(10)).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    println!("inline={:?}", p.eval("window.inline").unwrap());
    println!("log={:#?}", p.log());
    p.type_text("#q", "hello").unwrap();
    println!("typed={:?}", p.eval("window.typed").unwrap());
    p.select("#s", "b").unwrap();
    println!("sel={:?} err={:?}", p.eval("window.changed").unwrap(), p.select("#s", "zz"));
    let t = std::time::Instant::now();
    println!("scroll={:?} {:?}", p.scroll("#list", 50000.0), t.elapsed());
    println!("scroll={:?}", p.scroll("#list", 500000.0));
    println!("eval err={:?}", p.eval("(() => { throw new Error('x') })()"));
    println!("shot={:?}", p.screenshot("harness-self-check"));
    p.offline(true).unwrap();
    println!("fetch={:?}", p.eval("fetch('http://127.0.0.1:9/x').then(() => 'ok', e => String(e))"));
    std::thread::sleep(Duration::from_millis(300));
    println!("log={:#?}", p.log());
    println!("pid={}", b.pid());
}
