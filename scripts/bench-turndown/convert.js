// The turndown side of benches/html.rs: converts every .html file under a
// directory to Markdown with turndown (headingStyle atx, codeBlockStyle
// fenced), the files read first and only the conversion loop timed, one
// thread, same as the Rust side. turndown parses with its own
// @mixmark-io/domino on node; no other DOM is needed.
//
// Usage: node convert.js <dir> [--passes N] [--sample <page relative to dir> <out.md>]
// (the bench runs one pass per process, taking turns with the Rust side)
// Prints one line per timed pass, then a summary line the bench parses:
//   turndown pages=<n> bytes=<total html bytes> ms=<median pass ms>
'use strict';

const fs = require('fs');
const path = require('path');
const TurndownService = require('turndown');

function htmlFiles(dir) {
  const out = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...htmlFiles(full));
    else if (entry.isFile() && entry.name.endsWith('.html')) out.push(full);
  }
  return out;
}

function main() {
  const args = process.argv.slice(2);
  const dir = args[0];
  if (!dir) {
    console.error('usage: node convert.js <dir> [--passes N] [--sample <page> <out.md>]');
    process.exit(2);
  }
  let passes = 1;
  let sample = null;
  for (let i = 1; i < args.length; i++) {
    if (args[i] === '--passes') passes = Math.max(1, parseInt(args[++i], 10));
    else if (args[i] === '--sample') sample = [args[++i], args[++i]];
  }

  // Same order as the Rust side: paths sorted bytewise.
  const files = htmlFiles(dir).sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
  const pages = files.map((f) => fs.readFileSync(f, 'utf8'));
  const bytes = files.reduce((n, f) => n + fs.statSync(f).size, 0);

  const turndown = new TurndownService({ headingStyle: 'atx', codeBlockStyle: 'fenced' });

  const times = [];
  let outBytes = 0;
  for (let p = 0; p < passes; p++) {
    outBytes = 0;
    const start = process.hrtime.bigint();
    for (const html of pages) outBytes += turndown.turndown(html).length;
    const ms = Number(process.hrtime.bigint() - start) / 1e6;
    times.push(ms);
    console.log(`turndown pass ${p + 1}/${passes}: ${ms.toFixed(1)} ms (${outBytes} chars of Markdown)`);
  }

  if (sample) {
    const html = fs.readFileSync(path.join(dir, sample[0]), 'utf8');
    fs.mkdirSync(path.dirname(sample[1]), { recursive: true });
    fs.writeFileSync(sample[1], turndown.turndown(html) + '\n');
  }

  times.sort((a, b) => a - b);
  const median = times[Math.floor(times.length / 2)];
  console.log(`turndown pages=${pages.length} bytes=${bytes} ms=${median.toFixed(1)}`);
}

main();
