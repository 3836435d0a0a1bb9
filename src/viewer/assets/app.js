// sluice's run viewer: the runs, a run's timeline and calls, one call
// whole. Served by `sluice audit serve` (reading /api/...) or embedded in
// `sluice audit report --html` (reading the JSON the file carries).
//
// Every value from the record is put in the page as text (textContent,
// through el() and show()), never as markup, a link or a style; control
// characters are shown as escapes. The server's Content-Security-Policy
// (or the report's) allows this script alone.
'use strict';
(function () {
  const ROW = 24;          // px: one list row; the list is virtualized on it
  const PAGE = 200;        // rows a request brings
  const POLL_MS = 1000;    // a live run is read again this often

  const embedded = document.getElementById('sluice-data');
  const source = embedded ? reportSource(JSON.parse(embedded.textContent)) : serverSource();
  const main = document.getElementById('main');
  let view = null;         // the open run's state, or null

  // ---- reading ----------------------------------------------------------
  function serverSource() {
    return {
      live: true,
      get: async function (path, params) {
        const q = params ? '?' + new URLSearchParams(params).toString() : '';
        const r = await fetch('/api/' + path + q, { credentials: 'same-origin' });
        if (!r.ok) { throw new Error(r.status + ': ' + (await r.text())); }
        return r.json();
      },
    };
  }

  // The report answers the same paths from the data it carries.
  function reportSource(d) {
    // What a search looks in: the call's input, output and error.
    for (const r of d.rows) {
      const c = d.calls[r.n] || {};
      Object.defineProperty(r, 'text', { get: function () {
        return JSON.stringify([c.input, c.output, c.error]);
      } });
    }
    const rowsOf = (params) => d.rows.filter((r) => matches(r, params || {}));
    return {
      live: false,
      get: async function (path, params) {
        const p = path.split('/');
        if (path === 'runs') { return { total: 1, runs: [d.listing] }; }
        if (p.length === 2) { return d.summary; }
        if (p[2] === 'verify') { return d.verdict; }
        if (p[2] === 'timeline') { return d.timeline; }
        if (p[2] === 'calls' && p.length === 3) {
          const all = rowsOf(params);
          const offset = Number((params && params.offset) || 0);
          const limit = Number((params && params.limit) || PAGE);
          return { total: all.length, offset: offset, calls: all.slice(offset, offset + limit) };
        }
        if (p[2] === 'calls') {
          const c = d.calls[p[3]];
          if (!c) { throw new Error('404: no call #' + p[3] + ' in this report'); }
          return c;
        }
        throw new Error('404: ' + path);
      },
    };
  }

  function matches(r, f) {
    if (f.flow && r.flow !== f.flow) { return false; }
    if (f.tier && r.tier !== f.tier) { return false; }
    if (f.outcome && !(r.state === f.outcome || (f.outcome === 'pending' && r.state === 'unknown') ||
        (f.outcome === 'unknown' && r.state === 'pending'))) { return false; }
    if (f.decision && !(r.decisions || []).includes(f.decision)) { return false; }
    if (f.q && !(r.text || '').toLowerCase().includes(f.q.toLowerCase())) { return false; }
    return true;
  }

  // ---- building the page ------------------------------------------------
  // Control characters other than tab and newline, shown as escapes.
  function show(s) {
    return String(s === null || s === undefined ? '' : s).replace(
      /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g,
      (c) => '\\x' + c.charCodeAt(0).toString(16).padStart(2, '0'));
  }

  // An element with class, id, data- and title attributes and text or
  // element children: the only way this script makes nodes.
  function el(tag, attrs) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined) { continue; }
      if (k === 'class') { e.className = v; }
      else if (k === 'id' || k === 'title' || k.startsWith('data-')) { e.setAttribute(k, show(v)); }
      else if (k === 'value') { e.value = v; }
      else { throw new Error('el: attribute ' + k + ' is not one the viewer sets'); }
    }
    for (let i = 2; i < arguments.length; i++) {
      const c = arguments[i];
      if (c === null || c === undefined || c === false) { continue; }
      e.append(typeof c === 'object' ? c : show(c));
    }
    return e;
  }

  // The nodes of a list that may hold nulls (what is not shown).
  function present() { return Array.prototype.filter.call(arguments, (x) => x !== null && x !== undefined && x !== false); }

  function plural(n, one, many) { return n + ' ' + (n === 1 ? one : many); }

  function json(v) { return JSON.stringify(v, null, 2); }
  function utc(ms) { return ms ? new Date(ms).toISOString().replace('T', ' ').slice(0, 19) : '—'; }
  function took(us) {
    if (us === null || us === undefined) { return '—'; }
    if (us < 1000) { return us + 'µs'; }
    if (us < 1e6) { return (us / 1000).toFixed(us < 1e4 ? 1 : 0) + 'ms'; }
    return (us / 1e6).toFixed(2) + 's';
  }
  function ready(on) { document.body.dataset.ready = on ? '1' : '0'; }
  function fail(where, e) {
    where.replaceChildren(el('p', { class: 'failure' }, String(e.message || e)));
  }

  // ---- routes -------------------------------------------------------------
  function route() {
    ready(false);
    if (view && view.timer) { clearTimeout(view.timer); }
    view = null;
    const h = location.hash.replace(/^#/, '');
    const m = h.match(/^\/run\/([^/]+)(?:\/call\/(\d+))?$/);
    if (m) {
      runPage(decodeURIComponent(m[1]), m[2] ? Number(m[2]) : null);
    } else if (embedded && h === '') {
      runPage(JSON.parse(embedded.textContent).summary.run.id, null);
    } else {
      runsPage();
    }
  }

  window.addEventListener('hashchange', () => {
    const m = location.hash.match(/^#\/run\/([^/]+)\/call\/(\d+)$/);
    if (view && m && decodeURIComponent(m[1]) === view.id) {
      openCall(Number(m[2]));
    } else if (view && location.hash === '#/run/' + encodeURIComponent(view.id)) {
      closeCall();
    } else {
      route();
    }
  });

  // ---- the runs -----------------------------------------------------------
  async function runsPage() {
    document.title = 'sluice: runs';
    const body = el('tbody');
    const table = el('table', { id: 'runs' },
      el('thead', {}, el('tr', {}, ...['run', 'script', 'status', 'started', 'took', 'calls',
        'tokens', 'worker', 'record'].map((t) => el('th', {}, t)))), body);
    main.replaceChildren(el('h1', {}, 'Runs'), table);
    let listing;
    try { listing = await source.get('runs', { limit: 100 }); } catch (e) { return fail(main, e); }
    for (const r of listing.runs) {
      const verified = el('td', { class: 'verified', 'data-state': 'checking' }, 'checking…');
      const link = el('td', { class: 'id' }, r.id);
      const tr = el('tr', { class: 'run', 'data-run': r.id }, link,
        el('td', { class: 'script' }, r.script),
        el('td', { class: 'status status-' + r.status }, r.status),
        el('td', { class: 'started' }, utc(r.startedMs)),
        el('td', { class: 'duration' }, r.durationMs === null ? '—' : took(r.durationMs * 1000)),
        el('td', { class: 'calls' }, String(r.calls)),
        el('td', { class: 'tokens' }, tokens(r.models)),
        el('td', { class: 'worker' }, r.worker || '—'),
        verified);
      tr.addEventListener('click', () => { location.hash = '#/run/' + encodeURIComponent(r.id); });
      body.append(tr);
      verify(r.id, verified);
    }
    if (listing.total > listing.runs.length) {
      main.append(el('p', { class: 'note' }, listing.runs.length + ' of ' + listing.total + ' runs shown'));
    }
    ready(true);
  }

  function tokens(m) {
    if (!m || !m.calls) { return '—'; }
    return m.inputTokens + ' in / ' + m.outputTokens + ' out';
  }

  async function verify(id, cell) {
    try {
      const v = await source.get('runs/' + encodeURIComponent(id) + '/verify');
      const p = v.problem;
      cell.dataset.state = v.intact ? 'intact' : 'broken';
      cell.textContent = v.intact ? 'verified' : (p && p.n ? 'broken at #' + p.n : 'broken');
      if (p) { cell.title = show(p.message); }
    } catch (e) {
      cell.dataset.state = 'unknown';
      cell.textContent = 'cannot check';
      cell.title = show(e.message);
    }
  }

  // ---- a run --------------------------------------------------------------
  async function runPage(id, callN) {
    const base = 'runs/' + encodeURIComponent(id);
    view = { id: id, base: base, filter: {}, pages: new Map(), total: 0, brokenAt: null,
      timer: null, calls: -1, status: null, open: null };
    const v = view;
    const header = el('section', { id: 'run-header' });
    const integrity = el('p', { id: 'integrity', 'data-state': 'checking' }, 'checking the record…');
    const plan = el('section', { id: 'plan-box' });
    const timeline = el('section', { id: 'timeline' });
    const filters = el('div', { id: 'filters' });
    const total = el('span', { id: 'calls-total' }, '…');
    const space = el('div', { id: 'calls-space' });
    const list = el('div', { id: 'calls' }, space);
    const panel = el('aside', { id: 'call', class: 'closed' });
    main.replaceChildren(
      el('p', { class: 'crumbs' }, crumb('#/', 'runs'), ' / ', id),
      header, integrity, plan, timeline, filters,
      el('p', { class: 'count' }, 'calls shown: ', total),
      el('div', { id: 'split' }, list, panel));
    Object.assign(v, { header, integrity, plan, timeline, filters, totalEl: total, space, list, panel });
    list.addEventListener('scroll', () => draw(v));
    let s;
    try { s = await source.get(base); } catch (e) { return fail(main, e); }
    if (view !== v) { return; }
    document.title = 'sluice: ' + s.run.script;
    drawHeader(v, s);
    drawFilters(v, s);
    // Ready (interactive) once the calls and the timeline are drawn: the
    // verdict of a long run comes after, its line saying `checking` until then.
    const checked = drawIntegrity(v);
    await Promise.all([refresh(v), drawTimeline(v)]);
    ready(true);
    await checked;
    if (callN !== null) { openCall(callN); }
    if (s.live && source.live) { poll(v); }
  }

  function crumb(href, text) {
    const a = el('a', {}, text);
    a.href = href;           // a fixed route of the viewer's own, never a record's value
    return a;
  }

  function drawHeader(v, s) {
    const r = s.run;
    v.status = r.status;
    v.calls = s.calls;
    const field = (k, val) => el('div', { class: 'field' }, el('span', { class: 'k' }, k), el('span', { class: 'v' }, val));
    v.header.replaceChildren(...present(
      el('h1', {}, r.script),
      field('run', r.id),
      el('div', { class: 'field' }, el('span', { class: 'k' }, 'status'),
        el('span', { class: 'status status-' + r.status }, r.status + (r.error ? ': ' + r.error : ''))),
      field('started', utc(r.startedMs) + ' UTC' + (r.durationMs !== null ? ', took ' + took(r.durationMs * 1000) : '')),
      field('calls', s.calls + ' in ' + plural(s.tasks.length, 'task', 'tasks')),
      field('models', s.models.calls ? plural(s.models.calls, 'call', 'calls') + ', ' + s.models.inputTokens + ' input (' +
        s.models.cachedTokens + ' cached), ' + s.models.outputTokens + ' output tokens, ' +
        s.models.latencyMs + ' ms' : '—'),
      field('worker', r.worker || '—'),
      field('policies', (r.policies || []).map((p) => p.name + ' (' + String(p.sha256 || '').slice(0, 12) + ')').join(', ')),
      field('args', JSON.stringify(r.args)),
      field('workspace', r.workspace),
      r.resumedFrom ? field('resumed from', r.resumedFrom) : null));
    v.plan.replaceChildren();
    if (s.plan) {
      const items = (s.plan.plan || []).map((p) =>
        el('li', { 'data-status': p.status }, el('span', { class: 'mark' }, p.status), ' ', p.step));
      v.plan.append(el('div', { id: 'plan' }, el('h2', {}, 'Plan'),
        s.plan.explanation ? el('p', {}, s.plan.explanation) : null, el('ol', {}, ...items)));
    }
  }

  function drawFilters(v, s) {
    const select = (id, label, options) => {
      const sel = el('select', { id: id }, el('option', { value: '' }, label + ': all'),
        ...options.map((o) => el('option', { value: o }, o)));
      sel.addEventListener('change', () => setFilter(v));
      return sel;
    };
    const search = el('input', { id: 'f-search' });
    search.type = 'search';
    search.placeholder = 'search inputs and outputs';
    let pending = null;
    search.addEventListener('input', () => {
      clearTimeout(pending);
      pending = setTimeout(() => setFilter(v), 250);
    });
    v.filters.replaceChildren(
      select('f-flow', 'flow', s.flows),
      select('f-tier', 'tier', ['sealed', 'compensable', 'irreversible']),
      select('f-decision', 'decision', ['allow', 'deny', 'ask']),
      select('f-outcome', 'outcome', ['ok', 'error', 'unknown', 'pending']),
      search);
  }

  function setFilter(v) {
    const val = (id) => document.getElementById(id).value;
    v.filter = { flow: val('f-flow'), tier: val('f-tier'), decision: val('f-decision'),
      outcome: val('f-outcome'), q: val('f-search') };
    v.pages = new Map();
    v.list.scrollTop = 0;
    return refresh(v);
  }

  // ---- the virtualized list -----------------------------------------------
  async function refresh(v) {
    v.pages = new Map();
    await page(v, 0);
    draw(v);
  }

  // Page k of the filtered calls, fetched once.
  function page(v, k) {
    if (!v.pages.has(k)) {
      const params = Object.assign({ offset: k * PAGE, limit: PAGE }, clean(v.filter));
      const p = source.get(v.base + '/calls', params).then((got) => {
        if (view !== v) { return got; }
        v.total = got.total;
        v.total_text = String(got.total);
        v.pages.set(k, got);
        return got;
      }, (e) => { v.pages.delete(k); v.totalEl.textContent = String(e.message); });
      v.pages.set(k, p);
    }
    const got = v.pages.get(k);
    return got instanceof Promise ? got : Promise.resolve(got);
  }

  function clean(f) {
    const out = {};
    for (const [k, val] of Object.entries(f)) { if (val) { out[k] = val; } }
    return out;
  }

  // Draws the rows near the viewport, fetching the pages they are on.
  function draw(v) {
    if (view !== v) { return; }
    document.getElementById('calls-total').textContent = v.total_text || '0';
    const total = typeof v.total === 'number' ? v.total : 0;
    v.space.style.height = (total * ROW) + 'px';
    const first = Math.max(0, Math.floor(v.list.scrollTop / ROW) - 10);
    const last = Math.min(total, first + Math.ceil((v.list.clientHeight || 600) / ROW) + 20);
    const rows = [];
    for (let i = first; i < last; i++) {
      const k = Math.floor(i / PAGE);
      const got = v.pages.get(k);
      if (!got || got instanceof Promise) {
        page(v, k).then(() => draw(v));
        continue;
      }
      const c = got.calls[i - k * PAGE];
      if (c) { rows.push(rowOf(v, c, i)); }
    }
    v.space.replaceChildren(...rows);
  }

  function rowOf(v, c, i) {
    const cls = 'row state-' + c.state + (c.n === v.brokenAt ? ' broken' : '') + (c.n === v.open ? ' open' : '');
    const r = el('div', { class: cls, 'data-n': c.n },
      el('span', { class: 'n' }, '#' + c.n),
      el('span', { class: 'task' }, c.task),
      el('span', { class: 'flow' }, c.flow),
      el('span', { class: 'tier' }, c.tier),
      el('span', { class: 'decision' }, c.decision),
      el('span', { class: 'outcome' }, c.outcome),
      el('span', { class: 'took' }, took(c.durationUs)),
      el('span', { class: 'gist' }, c.gist));
    r.style.top = (i * ROW) + 'px';
    r.addEventListener('click', () => {
      location.hash = '#/run/' + encodeURIComponent(v.id) + '/call/' + c.n;
    });
    return r;
  }

  // ---- the timeline ---------------------------------------------------------
  async function drawTimeline(v) {
    let t;
    try { t = await source.get(v.base + '/timeline'); } catch (e) { return fail(v.timeline, e); }
    if (view !== v) { return; }
    const span = Math.max(t.spanUs, 1);
    const lanes = t.lanes.slice(0, 200).map((lane) => {
      const track = el('div', { class: 'track' });
      for (const [n, start, dur, outcome, calls] of lane.bars) {
        const b = el('div', { class: 'bar ' + outcome, 'data-n': n,
          title: '#' + n + (calls > 1 ? ' and ' + (calls - 1) + ' more' : '') + ', ' + took(dur) });
        b.style.left = (start / span * 100) + '%';
        b.style.width = Math.max(dur / span * 100, 0.2) + '%';
        b.addEventListener('click', () => {
          location.hash = '#/run/' + encodeURIComponent(v.id) + '/call/' + n;
        });
        track.append(b);
      }
      return el('div', { class: 'lane', 'data-task': lane.task }, el('span', { class: 'lane-name' }, 'task ' + lane.task), track);
    });
    const more = t.lanes.length > 200 ? el('p', { class: 'note' }, (t.lanes.length - 200) + ' more tasks not drawn') : null;
    const note = t.merged ? el('p', { class: 'note' }, 'many calls: bars close in time are drawn as one (hover for how many)') : null;
    v.timeline.replaceChildren(...present(el('h2', {}, 'Timeline (' + took(t.spanUs) + ')'), ...lanes, more, note));
  }

  // ---- integrity --------------------------------------------------------------
  async function drawIntegrity(v) {
    let r;
    try { r = await source.get(v.base + '/verify'); } catch (e) { return fail(v.integrity, e); }
    if (view !== v) { return; }
    const i = v.integrity;
    if (r.intact) {
      i.dataset.state = 'intact';
      i.textContent = 'record verified: ' + plural(r.calls, 'call', 'calls') + ', chain ' + (r.sealed ? 'sealed' : 'intact so far') +
        (r.warning ? ' (' + r.warning + ')' : '');
      v.brokenAt = null;
    } else {
      i.dataset.state = 'broken';
      const p = r.problem || {};
      if (p.n) { i.dataset.brokenAt = String(p.n); v.brokenAt = p.n; }
      i.textContent = 'RECORD BROKEN' + (p.n ? ' at call #' + p.n : '') + ': ' + show(p.message || p.failure);
      draw(v);
    }
  }

  // ---- live runs ------------------------------------------------------------
  function poll(v) {
    v.timer = setTimeout(async () => {
      if (view !== v) { return; }
      let state;
      try { state = await source.get(v.base + '/state'); } catch (e) { poll(v); return; }
      if (view !== v) { return; }
      const live = state.status === 'running';
      if (state.calls !== v.calls || state.status !== v.status) {
        const s = await source.get(v.base);
        if (view !== v) { return; }
        drawHeader(v, s);
        await Promise.all([refresh(v), drawTimeline(v)]);
        if (!live) { await drawIntegrity(v); }
      }
      if (live) { poll(v); }
    }, POLL_MS);
  }

  // ---- one call ---------------------------------------------------------------
  function closeCall() {
    if (!view) { return; }
    view.open = null;
    view.panel.className = 'closed';
    view.panel.replaceChildren();
    draw(view);
  }

  async function openCall(n) {
    const v = view;
    v.open = n;
    v.panel.className = 'open';
    v.panel.replaceChildren(el('p', {}, 'loading call #' + n + '…'));
    let c;
    try { c = await source.get(v.base + '/calls/' + n); } catch (e) { return fail(v.panel, e); }
    if (view !== v || v.open !== n) { return; }
    const section = (id, title, ...body) => el('section', { id: id }, el('h3', {}, title), ...body);
    const pre = (cls, text) => el('pre', { class: cls }, text);
    const parts = [
      el('h2', {}, '#' + c.n + ' ' + c.flow, el('span', { class: 'sub' }, ' ' + c.tier + ', task ' + c.task + (c.client ? ', from ' + c.client : ''))),
      c.broken ? section('call-integrity', 'The record breaks here', el('p', { class: 'failure' }, c.broken.failure + ': ' + c.broken.message)) : null,
      section('call-timing', 'Timing', el('p', {}, 'started ' + utc(c.startedMs) + ' UTC, took ' + took(c.durationUs) + ', outcome ' + c.outcome +
        (c.overlaps && c.overlaps.length ? ', ran beside ' + c.overlaps.map((x) => '#' + x).join(', ') : ''))),
      section('call-decision', 'Decisions', ...decisions(c)),
      section('call-route', 'Route', pre('route', c.route ? json(c.route) : 'no process (—)')),
    ];
    const sandbox = c.output && c.output.sandbox;
    if (sandbox) { parts.push(section('call-sandbox', 'Sandbox', pre('sandbox', json(sandbox)))); }
    if (c.diff) { parts.push(section('call-diff', 'Change', ...diff(c.diff))); }
    if (c.streams) {
      parts.push(section('call-streams', 'Streams',
        el('h4', {}, 'stdout'), pre('stdout', c.streams.stdout || ''),
        el('h4', {}, 'stderr'), pre('stderr', c.streams.stderr || ''),
        el('p', {}, 'exit code ' + show(c.streams.exitCode))));
    }
    if (c.conversation) { parts.push(section('call-conversation', 'Conversation', ...conversation(c.conversation))); }
    parts.push(section('call-input', 'Input', pre('json', json(c.input))));
    if (c.output !== null && c.output !== undefined) { parts.push(section('call-output', 'Output', pre('json', json(c.output)))); }
    if (c.error) { parts.push(section('call-error', 'Error', pre('json', json(c.error)))); }
    if (c.redacted && c.redacted.length) { parts.push(section('call-redacted', 'Redacted', pre('json', json(c.redacted)))); }
    parts.push(section('call-hashes', 'Hashes', pre('hash', 'prev ' + c.prev + '\nhash ' + c.hash + '\noutcome ' + (c.outcomeHash || '—'))));
    v.panel.replaceChildren(...present(...parts));
    draw(v);
  }

  function decisions(c) {
    const all = (c.decisions || []).concat(c.lateDecisions || []);
    if (!all.length) { return [el('p', {}, 'no capability was checked (the call failed before its decision)')]; }
    return all.map((d) => el('div', { class: 'decision ' + d.decision },
      el('span', { class: 'kind' }, d.decision), ' ',
      el('span', { class: 'capability' }, d.capability),
      el('div', { class: 'rule' }, d.by),
      d.source ? el('div', { class: 'source' }, d.source) : null,
      el('div', { class: 'reason' }, d.reason),
      d.approvedBy ? el('div', { class: 'approved' }, 'answered by ' + d.approvedBy) : null));
  }

  function diff(files) {
    const mark = { add: '+', del: '-', ctx: ' ', hdr: '' };
    return files.map((f) => el('div', { class: 'diff' }, el('div', { class: 'file' }, f.file),
      ...f.lines.map(([k, t]) => el('div', { class: k }, mark[k] + t))));
  }

  function conversation(cv) {
    const out = cv.messages.map((m) => el('div', { class: 'message', 'data-role': m.role },
      el('span', { class: 'role' }, m.role), el('pre', {}, m.text)));
    if (cv.reply) {
      out.push(el('div', { class: 'message reply', 'data-role': 'assistant' },
        el('span', { class: 'role' }, 'assistant (reply, ' + show(cv.reply.stopReason) + ')'),
        el('pre', {}, cv.reply.text),
        cv.reply.toolCalls && cv.reply.toolCalls.length ? el('pre', { class: 'tools' }, json(cv.reply.toolCalls)) : null));
    }
    const u = cv.usage || {};
    out.push(el('p', { id: 'call-tokens' }, 'model ' + show(cv.answeredBy || cv.model) + ' via ' + show(cv.provider) +
      ': ' + (u.inputTokens || 0) + ' input tokens (' + (u.cachedTokens || 0) + ' cached), ' +
      (u.outputTokens || 0) + ' output tokens, ' + (cv.latencyMs || 0) + ' ms'));
    return out;
  }

  route();
}());
