// The operator's dashboard of the example server: API keys, their limits
// and their traffic. Plain DOM code, no framework; every piece of data is
// rendered with textContent, since labels are user input.
'use strict';
(() => {
  const $ = (id) => document.getElementById(id);
  const el = (tag, props = {}) => Object.assign(document.createElement(tag), props);
  const REFRESH_MS = 5000;
  const SVG_NS = 'http://www.w3.org/2000/svg';

  const state = {
    csrf: null,       // set while signed in; the session cookie itself is HttpOnly
    keys: [],
    selected: null,   // id of the key in the detail panel
    detail: null,     // that key, with its minutes
    fillForm: false,  // refill the edit form even if the operator edited it
    timer: null,
  };

  // ---- formatting
  const num = (n) => Number(n || 0).toLocaleString('en-US');
  const short = (id) => String(id).slice(0, 8) + '…';
  const limitText = (k) => (k.rate > 0 ? `${k.rate}/s, burst ${k.burst}` : 'default');
  const fullTime = (iso) => (iso ? new Date(iso).toLocaleString() : '');
  const pad = (n) => String(n).padStart(2, '0');
  const hhmm = (d) => `${pad(d.getHours())}:${pad(d.getMinutes())}`;

  function bytesText(n) {
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
    let v = Number(n) || 0, i = 0;
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    if (i === 0) return `${v} B`;
    return `${v < 10 ? v.toFixed(1) : Math.round(v)} ${units[i]}`;
  }

  function ago(iso) {
    if (!iso) return 'never';
    const s = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
    if (s < 10) return 'just now';
    if (s < 60) return `${Math.floor(s)} s ago`;
    if (s < 3600) return `${Math.floor(s / 60)} min ago`;
    if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
    if (s < 30 * 86400) return `${Math.floor(s / 86400)} d ago`;
    return new Date(iso).toLocaleDateString();
  }

  // numberOf reads a number input: '' is 0 (the default), null is invalid.
  function numberOf(input) {
    const v = input.value.trim(), n = Number(v);
    if (input.validity.badInput) return null;
    return v === '' ? 0 : Number.isFinite(n) && n >= 0 ? n : null;
  }

  // ---- messages
  const say = (text, isError = false) => {
    $('message').textContent = text;
    $('message').classList.toggle('error', isError);
  };
  const fail = (err) => { if (!err.handled) say(err.message, true); };

  // ---- the API
  async function api(method, path, body) {
    const headers = { Accept: 'application/json' };
    if (method !== 'GET' && state.csrf) headers['X-CSRF-Token'] = state.csrf;
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const opts = { method, headers, credentials: 'same-origin', cache: 'no-store' };
    if (body !== undefined) opts.body = JSON.stringify(body);
    const res = await fetch(path, opts).catch((e) => { throw new Error(`Cannot reach the server: ${e.message}`); });
    const data = res.status === 204 ? null : await res.json().catch(() => null);
    if (res.ok) return data;
    const err = new Error((data && data.error) || `${res.status} ${res.statusText}`.trim());
    err.status = res.status;
    if (res.status === 401 && !path.startsWith('/api/session')) {
      signedOut('Your session has ended: sign in again.');
      err.handled = true;
    }
    throw err;
  }

  const keyPath = (id) => `/api/keys/${encodeURIComponent(id)}`;

  // coalesce runs fn once at a time; a call while it runs makes it run once
  // more afterwards, so that a reload asked for after a change sees it.
  function coalesce(fn) {
    let running = null, again = false;
    return () => {
      if (running) { again = true; return running; }
      running = (async () => {
        try { do { again = false; await fn(); } while (again); } finally { running = null; }
      })();
      return running;
    };
  }

  // ---- session
  function showSignedIn(on) {
    $('signin').hidden = on;
    $('keys-view').hidden = !on;
    $('signout').hidden = !on;
  }

  function signedIn(csrf) {
    state.csrf = csrf;
    showSignedIn(true);
    $('signin-error').textContent = '';
    clearInterval(state.timer);
    state.timer = setInterval(tick, REFRESH_MS);
    loadKeys();
  }

  function signedOut(text) {
    state.csrf = null;
    state.keys = [];
    clearInterval(state.timer);
    hideNewKey();
    closeDetail();
    $('keys-table').tBodies[0].replaceChildren();
    showSignedIn(false);
    say(text || '');
    $('token').focus();
  }

  function tick() {
    if (state.csrf && !document.hidden) { loadKeys(); if (state.selected) loadDetail(); }
  }

  // ---- the list
  const loadKeys = coalesce(async () => {
    try {
      const data = await api('GET', '/api/keys');
      if (!state.csrf) return;
      state.keys = (data && data.keys) || [];
      renderKeys();
    } catch (e) { fail(e); }
  });

  const COLUMNS = ['id', 'label', 'limit', 'requests', 'errors', 'bytes', 'last-used', 'status'];

  function newRow(id) {
    const tr = document.createElement('tr');
    tr.dataset.id = id;
    for (const c of COLUMNS) tr.insertCell().className = c;
    for (const c of ['requests', 'errors', 'bytes']) tr.querySelector(`.${c}`).classList.add('num');
    const show = el('button', { type: 'button', className: 'show quiet', textContent: 'Details' });
    show.addEventListener('click', () => openDetail(id));
    tr.insertCell().append(show);
    return tr;
  }

  function fillRow(tr, k) {
    const cells = {
      id: [short(k.id), k.id],
      label: [k.label || '—', ''],
      limit: [limitText(k), ''],
      requests: [num(k.requests), ''],
      errors: [num(k.errors), ''],
      bytes: [bytesText(k.bytes), `${num(k.bytes)} bytes`],
      'last-used': [ago(k.last_used), fullTime(k.last_used)],
    };
    for (const [c, [text, title]] of Object.entries(cells)) {
      Object.assign(tr.querySelector(`.${c}`), { textContent: text, title });
    }
    const status = k.revoked ? 'revoked' : 'active';
    tr.querySelector('.status').replaceChildren(el('span', { className: 'badge', textContent: status }));
    tr.classList.toggle('revoked', !!k.revoked);
    tr.classList.toggle('selected', k.id === state.selected);
  }

  function renderKeys() {
    const tbody = $('keys-table').tBodies[0];
    const ids = new Set(state.keys.map((k) => k.id));
    const rows = new Map();
    for (const tr of [...tbody.rows]) {
      if (ids.has(tr.dataset.id)) rows.set(tr.dataset.id, tr); else tr.remove();
    }
    state.keys.forEach((k, i) => {
      const tr = rows.get(k.id) || newRow(k.id);
      fillRow(tr, k);
      // Move rows only when out of place, so a focused button keeps focus.
      if (tbody.rows[i] !== tr) tbody.insertBefore(tr, tbody.rows[i] || null);
    });
    $('no-keys').hidden = state.keys.length > 0;
  }

  // ---- the new key panel
  function showNewKey(key) {
    $('new-key-value').value = key;
    $('copy-key').textContent = 'Copy';
    $('new-key').hidden = false;
    $('new-key-value').focus();
    $('new-key-value').select();
  }

  function hideNewKey() {
    $('new-key').hidden = true;
    $('new-key-value').value = '';
    $('copy-key').textContent = 'Copy';
  }

  async function copyKey() {
    const input = $('new-key-value');
    let ok = true;
    try {
      await navigator.clipboard.writeText(input.value);
    } catch (_) { // no clipboard API (plain HTTP off localhost) or no permission
      input.focus();
      input.select();
      try { ok = document.execCommand('copy'); } catch (_) { ok = false; }
    }
    $('copy-key').textContent = ok ? 'Copied' : 'Copy';
    if (ok) say('Copied the key to the clipboard');
    else say('Could not copy: select the key and copy it by hand', true);
  }

  // ---- the detail panel
  function openDetail(id) {
    if (state.selected !== id) {
      state.selected = id;
      state.detail = null;
      state.fillForm = true;
      $('confirm-revoke').hidden = true;
      $('detail-title').textContent = short(id);
      $('detail-meta').textContent = 'Loading…';
      $('chart').replaceChildren();
    }
    for (const tr of $('keys-table').tBodies[0].rows) tr.classList.toggle('selected', tr.dataset.id === id);
    $('detail').hidden = false;
    loadDetail().then(() => {
      if (state.selected === id) $('detail').scrollIntoView({ block: 'nearest', behavior: 'smooth' });
    });
  }

  function closeDetail() {
    state.selected = null;
    state.detail = null;
    $('detail').hidden = true;
    $('confirm-revoke').hidden = true;
    $('chart').replaceChildren();
    for (const tr of $('keys-table').tBodies[0].rows) tr.classList.remove('selected');
  }

  const loadDetail = coalesce(async () => {
    const id = state.selected;
    if (!id) return;
    try {
      const k = await api('GET', keyPath(id));
      if (state.selected !== id) return;
      state.detail = k;
      renderDetail();
    } catch (e) {
      if (e.status === 404 && state.selected === id) closeDetail();
      fail(e);
    }
  });

  // fillInput sets an input to the server's value unless the operator has
  // changed it since it was last filled.
  function fillInput(input, value, force) {
    if (force || input.value === input.dataset.orig) input.value = value;
    input.dataset.orig = value;
  }

  function renderDetail() {
    const k = state.detail, force = state.fillForm;
    state.fillForm = false;
    $('detail-title').replaceChildren(`${k.label || '(no label)'} `, el('code', { textContent: k.id }));
    $('detail-meta').textContent = [
      k.revoked ? `Revoked ${fullTime(k.revoked)}` : 'Active', `created ${fullTime(k.created)}`, `limit ${limitText(k)}`,
      `${num(k.requests)} requests, ${num(k.errors)} errors, ${bytesText(k.bytes)}`,
      `last used ${k.last_used ? fullTime(k.last_used) : 'never'}`,
    ].join(' · ');
    fillInput($('edit-label'), k.label || '', force);
    fillInput($('edit-rate'), k.rate > 0 ? String(k.rate) : '', force);
    fillInput($('edit-burst'), k.rate > 0 ? String(k.burst) : '', force);
    const revoked = !!k.revoked;
    for (const id of ['edit-label', 'edit-rate', 'edit-burst', 'save-button', 'revoke-button']) $(id).disabled = revoked;
    if (revoked) $('confirm-revoke').hidden = true;
    $('detail').classList.toggle('revoked', revoked);
    drawChart();
  }

  // Keep the minutes of the last GET when a PATCH or DELETE answers without them.
  function updateDetail(k) {
    if (!state.detail || state.detail.id !== k.id) return;
    state.detail = { ...k, minutes: k.minutes || state.detail.minutes };
    state.fillForm = true;
    renderDetail();
  }

  async function save(e) {
    e.preventDefault();
    const k = state.detail;
    if (!k) return;
    const [label, rate, burst] = [$('edit-label'), $('edit-rate'), $('edit-burst')];
    const body = {};
    if (label.value.trim() !== (k.label || '')) body.label = label.value.trim();
    if (rate.value !== rate.dataset.orig || burst.value !== burst.dataset.orig) {
      [body.rate, body.burst] = [numberOf(rate), numberOf(burst)];
      if (body.rate === null || body.burst === null) return say('Rate and burst must be numbers of 0 or more', true);
    }
    if (Object.keys(body).length === 0) return say('Nothing to save: no field was changed');
    $('save-button').disabled = true;
    try {
      const updated = await api('PATCH', keyPath(k.id), body);
      const done = [];
      if ('label' in body) done.push(`Label of ${short(k.id)} set to “${updated.label}”`);
      if ('rate' in body) done.push(`Limit of ${short(k.id)} set to ${limitText(updated)}`);
      say(done.join('; '));
      updateDetail(updated);
      loadKeys();
    } catch (err) { fail(err); } finally {
      $('save-button').disabled = !!(state.detail && state.detail.revoked);
    }
  }

  async function revoke() {
    const id = state.selected;
    if (!id) return;
    $('confirm-revoke-yes').disabled = true;
    try {
      const k = await api('DELETE', keyPath(id));
      $('confirm-revoke').hidden = true;
      say(`Key ${short(id)} revoked`);
      if (k) updateDetail(k);
      loadKeys();
      loadDetail();
    } catch (err) { fail(err); } finally { $('confirm-revoke-yes').disabled = false; }
  }

  // ---- the chart
  function svg(name, attrs, parent) {
    const el = document.createElementNS(SVG_NS, name);
    for (const [a, v] of Object.entries(attrs)) el.setAttribute(a, String(v));
    if (parent) parent.append(el);
    return el;
  }

  function text(parent, x, y, anchor, content, cls = 'axis-label') {
    svg('text', { x, y, 'text-anchor': anchor, class: cls }, parent).textContent = content;
  }

  function drawChart() {
    const k = state.detail;
    if (!k) return;
    const range = Number($('chart-range').value) || 60;
    const size = Math.max(1, Math.ceil(range / 120)); // minutes per bar
    const n = Math.ceil(range / size);
    const startMin = Math.floor(Date.now() / 60000) + 1 - n * size; // the bars end with this minute
    const req = new Array(n).fill(0), err = new Array(n).fill(0);
    for (const m of k.minutes || []) {
      const i = Math.floor((Math.floor(Date.parse(m.start) / 60000) - startMin) / size);
      if (i >= 0 && i < n) { req[i] += m.requests || 0; err[i] += m.errors || 0; }
    }
    const max = Math.max(1, ...req, ...err);
    const total = req.reduce((a, b) => a + b, 0);
    const unit = size === 1 ? 'minute' : `${size} minutes`;
    const W = 760, H = 200, L = 8, R = 8, T = 20, B = 22;
    const pw = W - L - R, ph = H - T - B, bw = pw / n;
    const gap = bw > 3 ? 1 : 0;
    const label = $('chart-range').selectedOptions[0].textContent.toLowerCase();
    const root = svg('svg', {
      viewBox: `0 0 ${W} ${H}`, role: 'img', class: 'chart',
      'aria-label': `Requests per ${unit}, ${label}: ${num(total)} in all, at most ${num(max)} per bar`,
    });
    svg('line', { class: 'grid', x1: L, x2: W - R, y1: T, y2: T }, root);
    const rect = (cls, i, v) => {
      const h = (v / max) * ph, x = (L + i * bw + gap / 2).toFixed(2), width = Math.max(bw - gap, 0.5).toFixed(2);
      return svg('rect', { class: cls, x, y: (T + ph - h).toFixed(2), width, height: h.toFixed(2) }, root);
    };
    for (let i = 0; i < n; i++) {
      const at = hhmm(new Date((startMin + i * size) * 60000));
      svg('title', {}, rect('bar', i, req[i])).textContent = `${at} — ${num(req[i])} requests, ${num(err[i])} errors`;
      if (err[i] > 0) rect('bar-errors', i, err[i]);
    }
    svg('line', { class: 'axis', x1: L, x2: W - R, y1: T + ph, y2: T + ph }, root);
    text(root, L, T - 6, 'start', `max ${num(max)} requests per ${unit}`);
    text(root, W - R, T - 6, 'end', `${num(total)} requests in ${label.replace(/^last /, 'the last ')}`);
    text(root, L, H - 6, 'start', hhmm(new Date(startMin * 60000)));
    text(root, L + pw / 2, H - 6, 'middle', hhmm(new Date((startMin + (n * size) / 2) * 60000)));
    text(root, W - R, H - 6, 'end', 'now');
    if (total === 0) text(root, L + pw / 2, T + ph / 2, 'middle', 'No requests in this range', 'empty-label');
    $('chart').replaceChildren(root);
  }

  // ---- wiring
  $('signin').addEventListener('submit', async (e) => {
    e.preventDefault();
    const token = $('token');
    $('signin-error').textContent = '';
    $('signin-button').disabled = true;
    try {
      const s = await api('POST', '/api/session', { token: token.value });
      token.value = '';
      say('Signed in');
      signedIn(s.csrf);
    } catch (err) {
      $('signin-error').textContent = err.message;
      token.select();
    } finally { $('signin-button').disabled = false; }
  });

  $('signout').addEventListener('click', async () => {
    try { await api('DELETE', '/api/session'); } catch (err) { if (err.status !== 401) return fail(err); }
    signedOut('Signed out');
  });

  $('create').addEventListener('submit', async (e) => {
    e.preventDefault();
    const [rate, burst] = [numberOf($('new-rate')), numberOf($('new-burst'))];
    if (rate === null || burst === null) return say('Rate and burst must be numbers of 0 or more', true);
    const body = { label: $('new-label').value.trim() };
    if (rate > 0) body.rate = rate;
    if (burst > 0) body.burst = burst;
    $('create-button').disabled = true;
    try {
      const k = await api('POST', '/api/keys', body);
      $('create').reset();
      showNewKey(k.key);
      say(`Key ${short(k.id)} created`);
      loadKeys();
    } catch (err) { fail(err); } finally { $('create-button').disabled = false; }
  });

  $('copy-key').addEventListener('click', copyKey);
  $('dismiss-key').addEventListener('click', hideNewKey);
  $('refresh').addEventListener('click', tick);
  $('detail-close').addEventListener('click', closeDetail);
  $('edit').addEventListener('submit', save);
  $('revoke-button').addEventListener('click', () => { $('confirm-revoke').hidden = false; $('confirm-revoke-no').focus(); });
  $('confirm-revoke-no').addEventListener('click', () => { $('confirm-revoke').hidden = true; $('revoke-button').focus(); });
  $('confirm-revoke-yes').addEventListener('click', revoke);
  $('chart-range').addEventListener('change', drawChart);
  document.addEventListener('visibilitychange', tick);

  // On load: skip the form when the session cookie is still good.
  (async () => {
    try {
      const s = await api('GET', '/api/session');
      signedIn(s.csrf);
    } catch (err) {
      $('signin').hidden = false;
      if (err.status !== 401) $('signin-error').textContent = err.message;
      $('token').focus();
    }
  })();
})();
