// The console: plain DOM over the public HTTP API.  Every value from the server
// is set with textContent (never as markup), and the key lives only in this
// tab's sessionStorage and in the Authorization header of our own requests.

const KEY_STORAGE = "memory_plugin.key";
const BASE = location.pathname.replace(/\/_console\/?$/, "");
const MEMORY = "/_plugins/_ml/memory";
const HISTORIES = "/v2/ai/conversation_histories";
const CONTAINERS = "/_plugins/_ml/memory_containers";
const STATUS_EVERY_MS = 30000;

const $ = (selector) => document.querySelector(selector);

/** An element with properties and children; strings become text nodes, never markup. */
function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (name === "dataset") Object.assign(node.dataset, value);
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node[name] = value;
  }
  node.append(...children.filter((child) => child !== null && child !== undefined));
  return node;
}

function show(node, visible) {
  node.hidden = !visible;
}

function when(iso) {
  if (!iso) return "";
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? String(iso) : date.toLocaleString();
}

// -- the API ------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/** The error as the API words it: Telnyx `errors[0].detail` or OpenSearch `error.reason`. */
function apiMessage(body, fallback) {
  if (body && Array.isArray(body.errors) && body.errors.length) {
    const [first] = body.errors;
    return first.detail || first.title || fallback;
  }
  if (body && body.error) return typeof body.error === "string" ? body.error : body.error.reason || fallback;
  return fallback;
}

function key() {
  return sessionStorage.getItem(KEY_STORAGE);
}

async function api(path, { method = "GET", params = [], token = key(), body = undefined } = {}) {
  const query = new URLSearchParams(params).toString();
  const headers = { Authorization: `Bearer ${token}`, Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(BASE + path + (query ? `?${query}` : ""), {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "omit",
    cache: "no-store",
  });
  const text = await response.text();
  let answer = null;
  try {
    answer = text ? JSON.parse(text) : null;
  } catch {
    answer = text;
  }
  if (!response.ok) {
    throw new ApiError(response.status, apiMessage(answer, response.statusText || "request failed"));
  }
  return answer;
}

function showError(node, error) {
  if (!error) {
    node.textContent = "";
    show(node, false);
    return;
  }
  node.textContent = error instanceof ApiError ? `${error.status}: ${error.message}` : `Error: ${error.message}`;
  show(node, true);
}

// -- the key ------------------------------------------------------------------------

async function useKey(token) {
  showError($("#key-error"), null);
  try {
    await api("/", { token });
  } catch (error) {
    showError($("#key-error"), error);
    return;
  }
  sessionStorage.setItem(KEY_STORAGE, token);
  $("#key").value = "";
  signedIn(true);
}

function signedIn(yes) {
  show($("#tabs"), yes);
  show($("#forget-key"), yes);
  $("#key").placeholder = yes ? "key in use (enter another to switch)" : "key_…";
  $("#key").required = !yes;
  if (yes) {
    selectTab(sessionStorage.getItem("memory_plugin.tab") || "memories");
    memories.tokens = [0];
    loadMemories();
    refreshStatus();
    startAgentic();
  } else {
    show($("#memories"), false);
    show($("#search"), false);
    $("#status").replaceChildren(el("span", { className: "muted" }, "Enter an API key: the page shows nothing without one."));
    $("#memory-table tbody").replaceChildren();
    $("#results").replaceChildren();
    show($("#memory-detail"), false);
    show($("#agentic"), false);
    $("#container-table tbody").replaceChildren();
    show($("#container-detail"), false);
  }
}

// -- tabs -----------------------------------------------------------------------------

function selectTab(name) {
  for (const tab of document.querySelectorAll("#tabs [role=tab]")) {
    const selected = tab.getAttribute("aria-controls") === name;
    tab.setAttribute("aria-selected", String(selected));
    tab.tabIndex = selected ? 0 : -1;
    show($(`#${tab.getAttribute("aria-controls")}`), selected);
  }
  sessionStorage.setItem("memory_plugin.tab", name);
}

function onTabKey(event) {
  const tabs = [...document.querySelectorAll("#tabs [role=tab]")];
  const index = tabs.indexOf(document.activeElement);
  if (index < 0 || !["ArrowLeft", "ArrowRight"].includes(event.key)) return;
  const next = tabs[(index + (event.key === "ArrowRight" ? 1 : tabs.length - 1)) % tabs.length];
  next.focus();
  selectTab(next.getAttribute("aria-controls"));
}

// -- status strip ---------------------------------------------------------------------

/** Prometheus text format: [{name, labels, value}] (enough for our own metrics). */
function parseMetrics(text) {
  const samples = [];
  for (const line of text.split("\n")) {
    const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!match) continue;
    const labels = {};
    for (const [, name, value] of (match[2] || "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[name] = value;
    samples.push({ name: match[1], labels, value: Number(match[3]) });
  }
  return samples;
}

function sum(samples, name, filter = () => true) {
  return samples.filter((s) => s.name === name && filter(s.labels)).reduce((total, s) => total + s.value, 0);
}

async function fetchMetrics() {
  const response = await fetch(`${BASE}/_metrics`, {
    headers: { Authorization: `Bearer ${key()}` },
    credentials: "omit",
    cache: "no-store",
  });
  if (response.status === 401 || response.status === 403) return null;
  if (!response.ok) throw new ApiError(response.status, response.statusText);
  return parseMetrics(await response.text());
}

function chip(label, value, state = "") {
  return el("span", { className: `chip ${state}` }, el("span", { className: "chip-label" }, label), " ", value);
}

async function refreshStatus() {
  if (!key()) return;
  const strip = [];
  const [root, health, metrics] = await Promise.allSettled([api("/"), fetch(`${BASE}/_health`).then((r) => r.json()), fetchMetrics()]);
  if (root.status === "fulfilled") {
    strip.push(chip("version", `${root.value.version.number} · build ${root.value.version.build_hash}`));
  } else {
    strip.push(chip("server", root.reason.message, "bad"));
  }
  if (health.status === "fulfilled") {
    const state = health.value.status;
    strip.push(chip("health", state, state === "green" ? "good" : "bad"));
  } else {
    strip.push(chip("health", "unreachable", "bad"));
  }
  if (metrics.status === "fulfilled" && metrics.value === null) {
    strip.push(chip("metrics", "need an operator key", "muted"));
  } else if (metrics.status === "fulfilled") {
    const samples = metrics.value;
    const regions = [...new Set(samples.filter((s) => s.name === "memory_plugin_region_seconds_count").map((s) => s.labels.region))];
    for (const region of regions.sort()) {
      const calls = sum(samples, "memory_plugin_region_seconds_count", (l) => l.region === region);
      const failed = sum(samples, "memory_plugin_region_failures_total", (l) => l.region === region);
      const plural = calls === 1 ? "call" : "calls";
      const text = failed ? `${failed} of ${calls} ${plural} failed` : `${calls} ${plural} ok`;
      strip.push(chip(region, text, failed ? "bad" : "good"));
    }
    const pending = sum(samples, "memory_plugin_embedder_pending");
    const waited = sum(samples, "memory_plugin_embedder_queue_seconds_sum");
    const texts = sum(samples, "memory_plugin_embedder_queue_seconds_count");
    const mean = texts ? ` · mean wait ${((waited / texts) * 1000).toFixed(1)} ms` : "";
    strip.push(chip("embedder queue", `${pending} pending${mean}`, pending > 100 ? "bad" : ""));
    if (samples.some((s) => s.name === "memory_plugin_indexing_backlog")) {
      strip.push(chip("indexing backlog", String(sum(samples, "memory_plugin_indexing_backlog"))));
    }
  } else {
    strip.push(chip("metrics", metrics.reason.message, "bad"));
  }
  strip.push(el("button", { type: "button", className: "link", title: "Refresh status", onclick: refreshStatus }, "↻"));
  $("#status").replaceChildren(...strip);
}

// -- memories -------------------------------------------------------------------------

const memories = { tokens: [0], page: 0, next: null, open: null, messagesNext: null };

async function loadMemories() {
  const size = $("#page-size").value;
  const token = memories.tokens[memories.page];
  try {
    const body = await api(MEMORY, { params: { max_results: size, next_token: token } });
    showError($("#memories-error"), null);
    memories.next = body.next_token ?? null;
    renderMemories(body.memories || []);
  } catch (error) {
    showError($("#memories-error"), error);
  }
}

function renderMemories(list) {
  const rows = list.map((memory) =>
    el(
      "tr",
      { dataset: { memoryId: memory.memory_id } },
      el("td", {}, el("button", { type: "button", className: "link open", onclick: () => openMemory(memory.memory_id) },
        memory.name || "(unnamed)"), el("div", { className: "muted small" }, memory.memory_id)),
      el("td", {}, when(memory.updated_time)),
      el("td", {}, el("button", { type: "button", className: "danger delete", onclick: () => confirmDelete(memory) }, "Delete")),
    ),
  );
  $("#memory-table tbody").replaceChildren(...rows);
  show($("#memories-empty"), list.length === 0);
  $("#newer").disabled = memories.page === 0;
  $("#older").disabled = memories.next === null;
  $("#page-label").textContent = `page ${memories.page + 1}`;
}

async function openMemory(memoryId) {
  const detail = $("#memory-detail");
  showError($("#detail-error"), null);
  try {
    const memory = await api(`${MEMORY}/${encodeURIComponent(memoryId)}`);
    memories.open = memory.memory_id;
    memories.messagesNext = 0;
    $("#detail-name").textContent = memory.name || "(unnamed)";
    const meta = [["memory_id", memory.memory_id], ["created", when(memory.create_time)], ["updated", when(memory.updated_time)]];
    if (memory.user) meta.push(["user", memory.user]);
    if (memory.additional_info) meta.push(["additional_info", JSON.stringify(memory.additional_info)]);
    $("#detail-meta").replaceChildren(...meta.flatMap(([name, value]) => [el("dt", {}, name), el("dd", {}, value)]));
    $("#messages").replaceChildren();
    show(detail, true);
    await loadMessages();
    $("#detail-name").focus();
  } catch (error) {
    show(detail, true);
    showError($("#detail-error"), error);
  }
}

async function loadMessages() {
  try {
    const body = await api(`${MEMORY}/${encodeURIComponent(memories.open)}/messages`, {
      params: { max_results: 50, next_token: memories.messagesNext },
    });
    $("#messages").append(...(body.messages || []).map(renderMessage));
    memories.messagesNext = body.next_token ?? null;
    show($("#more-messages"), memories.messagesNext !== null);
    if (!$("#messages").children.length) $("#messages").append(el("li", { className: "muted" }, "No messages."));
  } catch (error) {
    showError($("#detail-error"), error);
  }
}

function renderMessage(message) {
  const fields = [];
  for (const name of ["input", "prompt_template", "response", "origin"]) {
    if (message[name]) fields.push(el("dt", {}, name), el("dd", { className: name }, message[name]));
  }
  if (message.additional_info) fields.push(el("dt", {}, "additional_info"), el("dd", {}, JSON.stringify(message.additional_info)));
  const traces = el("ol", { className: "traces" });
  const item = el(
    "li",
    { className: "message", dataset: { messageId: message.message_id } },
    el("div", { className: "muted small" }, `${when(message.create_time)} · ${message.message_id}`),
    el("dl", { className: "meta" }, ...fields),
    el("button", { type: "button", className: "link", onclick: (event) => loadTraces(message.message_id, traces, event.target) }, "Traces"),
    traces,
  );
  return item;
}

async function loadTraces(messageId, list, button) {
  try {
    const body = await api(`${MEMORY}/message/${encodeURIComponent(messageId)}/traces`, { params: { max_results: 100 } });
    const traces = body.traces || [];
    list.replaceChildren(
      ...(traces.length ? traces.map(renderMessage) : [el("li", { className: "muted" }, "No traces.")]),
    );
    button.hidden = true;
  } catch (error) {
    list.replaceChildren(el("li", { className: "error", role: "alert" }, `${error.status ?? ""}: ${error.message}`));
  }
}

function confirmDelete(memory) {
  const dialog = $("#confirm-delete");
  $("#confirm-name").textContent = memory.name || memory.memory_id;
  dialog.returnValue = "";
  dialog.addEventListener(
    "close",
    async () => {
      if (dialog.returnValue !== "delete") return;
      try {
        await api(`${MEMORY}/${encodeURIComponent(memory.memory_id)}`, { method: "DELETE" });
        showError($("#memories-error"), null);
        if (memories.open === memory.memory_id) show($("#memory-detail"), false);
        await loadMemories();
      } catch (error) {
        showError($("#memories-error"), error);
      }
    },
    { once: true },
  );
  dialog.showModal();
}

// -- search ---------------------------------------------------------------------------

const search = { page: 1, totalPages: 0 };

/**
 * The histories search's modes, as the API scores them: cosine and hybrid (fused by rank) are 0–1, BM25 has no
 * upper bound, so `min_score` takes any score >= 0 in keyword mode and its scores show with fewer decimals.
 */
const SEARCH_MODES = {
  semantic: { kind: "cosine", title: "cosine similarity (0–1)", digits: 4, max: "1", step: "0.01", placeholder: "0–1" },
  keyword: { kind: "BM25", title: "BM25 score (0 and up, no upper bound; compare within one query only)", digits: 3, max: null, step: "any", placeholder: "≥ 0 (BM25)" },
  hybrid: { kind: "hybrid", title: "reciprocal-rank fusion of cosine and BM25, normalised to 0–1", digits: 4, max: "1", step: "0.01", placeholder: "0–1" },
};

/** min_score's input takes the selected mode's range. */
function applyMode() {
  const mode = SEARCH_MODES[$("#mode").value];
  const input = $("#min-score");
  if (mode.max === null) input.removeAttribute("max");
  else input.max = mode.max;
  input.step = mode.step;
  input.placeholder = mode.placeholder;
  input.title = `min_score: ${mode.title}`;
}

function addFilter(field = "", op = "eq", value = "") {
  const row = $("#filter-row").content.firstElementChild.cloneNode(true);
  row.querySelector(".filter-field").value = field;
  row.querySelector(".filter-op").value = op;
  row.querySelector(".filter-value").value = value;
  row.querySelector(".remove-filter").addEventListener("click", () => row.remove());
  $("#filters").append(row);
  row.querySelector(".filter-field").focus();
}

/** The form as the API's query parameters, filters as `filter[field][op]=value`. */
function searchParams() {
  const params = [
    ["q", $("#q").value],
    ["record_type", $("#record-type").value],
    ["mode", $("#mode").value],
  ];
  if ($("#region").value) params.push(["region", $("#region").value]);
  if ($("#top-k").value) params.push(["top_k", $("#top-k").value]);
  if ($("#min-score").value) params.push(["min_score", $("#min-score").value]);
  for (const row of document.querySelectorAll("#filters .filter-row")) {
    const field = row.querySelector(".filter-field").value.trim();
    const op = row.querySelector(".filter-op").value;
    if (!field) continue;
    params.push([op === "eq" ? `filter[${field}]` : `filter[${field}][${op}]`, row.querySelector(".filter-value").value]);
  }
  params.push(["page[number]", String(search.page)]);
  return params;
}

async function runSearch() {
  showError($("#search-error"), null);
  $("#search-meta").textContent = "Searching…";
  try {
    const params = searchParams();
    const body = await api(HISTORIES, { params });
    renderResults(body, new URLSearchParams(params).get("mode"));
  } catch (error) {
    $("#search-meta").textContent = "";
    $("#results").replaceChildren();
    show($("#failed-regions"), false);
    showError($("#search-error"), error);
  }
  refreshStatus();
}

/** One page of results, scored in `mode` (the mode the request was sent with, whatever the form says since). */
function renderResults(body, mode) {
  const meta = body.meta || {};
  const scoring = SEARCH_MODES[mode];
  search.totalPages = meta.total_pages || 0;
  $("#search-meta").textContent =
    `${meta.total_results ?? 0} ${mode} results · page ${meta.page_number ?? 1} of ${Math.max(meta.total_pages ?? 0, 1)}`;
  const failed = meta.failed_regions || [];
  $("#failed-regions").textContent = failed.length ? `Regions that did not answer: ${failed.join(", ")}` : "";
  show($("#failed-regions"), failed.length > 0);
  $("#results").replaceChildren(
    ...(body.data || []).map((hit) => {
      const facts = [
        ["record_id", hit.record_id],
        ["chunk", `${hit.chunk_index + 1} of ${hit.chunk_total}`],
        ["record_type", hit.record_type],
        ["region", hit.region],
        ["user_id", hit.user_id ?? "—"],
        ["created", when(hit.record_created_at)],
        ["ingested", when(hit.ingested_at)],
      ];
      if (hit.document_id) facts.push(["document_id", hit.document_id]);
      const metadata = Object.entries(hit.metadata || {});
      return el(
        "li",
        { className: "result", dataset: { recordId: hit.record_id, chunkIndex: String(hit.chunk_index), mode } },
        el("div", { className: "result-head" },
          el("span", { className: "score", title: scoring.title }, hit.score.toFixed(scoring.digits)),
          el("span", { className: "score-kind" }, scoring.kind),
          el("span", { className: "record" }, hit.record_id)),
        el("p", { className: "chunk-text" }, hit.text),
        el("dl", { className: "facts" }, ...facts.map(([name, value]) => el("div", {}, el("dt", {}, name), el("dd", {}, String(value))))),
        metadata.length
          ? el("dl", { className: "meta metadata" }, ...metadata.flatMap(([name, value]) => [el("dt", {}, name), el("dd", {}, String(value))]))
          : null,
      );
    }),
  );
  if (!(body.data || []).length) $("#results").append(el("li", { className: "muted" }, "No results."));
  $("#prev-results").disabled = search.page <= 1;
  $("#next-results").disabled = search.page >= search.totalPages;
}

// -- agentic memory -------------------------------------------------------------------

const PAGE_SIZE = 20;
/** Every list below is sorted by a time and then `_id`, so a page's last hit is a unique `search_after` cursor. */
const NEWEST_FIRST = [{ last_updated_time: "desc" }, { _id: "asc" }];
const OLDEST_FIRST = [{ created_time: "asc" }, { _id: "asc" }];

const agentic = {
  me: null, // the key's principal (GET /_console/whoami)
  container: null, // the open container's id and _source
  facts: null,
  sessions: null,
  session: null, // the open session's id
  fact: null, // the open fact's id
  texts: new Map(), // fact id -> text, from what was shown, for the forgetting report
};

function containerPath(...parts) {
  return [CONTAINERS, agentic.container.id, ...parts].map((part, i) => (i ? encodeURIComponent(part) : part)).join("/");
}

function namespaceText(namespace) {
  return Object.entries(namespace || {})
    .map(([name, value]) => `${name}=${value}`)
    .join(", ");
}

function metaList(node, pairs) {
  node.replaceChildren(
    ...pairs.filter(([, value]) => value !== undefined && value !== null && value !== "")
      .flatMap(([name, value]) => [el("dt", {}, name), el("dd", {}, value)]),
  );
}

function messageText(message) {
  const content = Array.isArray(message.content) ? message.content : [message.content];
  const text = content.map((part) => (part && typeof part === "object" ? part.text ?? JSON.stringify(part) : String(part ?? ""))).join(" ");
  return `${message.role || "?"}: ${text}`;
}

/**
 * A list paged by the server with `search_after`: one request of one page per step, whatever the list's size,
 * and a cursor kept per page seen so "back" is one request too.
 */
class ServerPages {
  constructor({ path, query = () => ({ match_all: {} }), sort = NEWEST_FIRST, size = PAGE_SIZE, render, prev, next, label, error }) {
    Object.assign(this, { path, query, sort, size, render, prev, next, label, error });
    this.reset();
  }

  reset() {
    this.cursors = [null];
    this.page = 0;
  }

  async load() {
    const request = (this.latest = (this.latest || 0) + 1); // an answer to an older click is dropped
    const body = { query: this.query(), sort: this.sort, size: this.size, track_total_hits: true, _source: { excludes: ["memory_embedding"] } };
    const after = this.cursors[this.page];
    if (after) body.search_after = after;
    try {
      const answer = await api(this.path(), { method: "POST", body });
      if (request !== this.latest) return [];
      showError(this.error, null);
      const hits = answer.hits.hits;
      const total = answer.hits.total?.value ?? hits.length;
      const first = this.page * this.size;
      this.cursors[this.page + 1] = hits.length === this.size && first + hits.length < total ? hits[hits.length - 1].sort : null;
      this.render(hits);
      if (this.prev) this.prev.disabled = this.page === 0;
      if (this.next) this.next.disabled = !this.cursors[this.page + 1];
      if (this.label) this.label.textContent = hits.length ? `${first + 1}–${first + hits.length} of ${total}` : `0 of ${total}`;
      return hits;
    } catch (error) {
      showError(this.error, error);
      return [];
    }
  }

  older() {
    if (!this.cursors[this.page + 1]) return;
    this.page += 1;
    this.load();
  }

  newer() {
    this.page = Math.max(0, this.page - 1);
    this.load();
  }
}

const containerPages = new ServerPages({
  path: () => `${CONTAINERS}/_search`,
  sort: [{ created_time: "desc" }, { _id: "asc" }],
  render: renderContainers,
  prev: null,
  next: null,
  label: null,
  error: null,
});

async function startAgentic() {
  agentic.me = null;
  agentic.container = null; // another key may not use the container shown
  agentic.texts.clear();
  show($("#container-detail"), false);
  try {
    agentic.me = await api("/_console/whoami");
    const roles = agentic.me.backend_roles.length ? ` · roles ${agentic.me.backend_roles.join(", ")}` : "";
    $("#whoami").textContent = `${agentic.me.user_id ? `user ${agentic.me.user_id}` : "organisation key"} · ${agentic.me.organization_id}${roles}`;
  } catch (error) {
    showError($("#agentic-error"), error);
  }
  containerPages.reset();
  await containerPages.load();
}

/** Own (the key's user wrote it; for the organisation key, its own) or shared with the key, and how. */
function access(source) {
  const owner = source.owner?.name ?? "";
  const me = agentic.me?.user_id ?? "";
  if (owner === me) return { own: true, text: "own", title: "created with this key's user" };
  const roles = (source.backend_roles || []).filter((role) => agentic.me?.backend_roles.includes(role));
  const how = roles.length ? `through role ${roles.join(", ")}` : "to the organisation key";
  return { own: false, text: `shared by ${owner || "the organisation"}`, title: `owned by ${owner || "the organisation key"}, open ${how}` };
}

function renderContainers(hits) {
  const rows = hits.map((hit) => {
    const source = hit._source;
    const shared = access(source);
    const strategies = (source.configuration?.strategies || []).map((s) => s.type).join(", ");
    return el(
      "tr",
      { dataset: { containerId: hit._id } },
      el("td", {}, el("button", { type: "button", className: "link open", onclick: () => openContainer(hit._id) }, source.name || "(unnamed)"),
        el("div", { className: "muted small" }, hit._id)),
      el("td", {}, el("span", { className: `badge ${shared.own ? "own" : "shared"}`, title: shared.title }, shared.text)),
      el("td", {}, strategies || "—"),
      el("td", {}, when(source.last_updated_time)),
    );
  });
  $("#container-table tbody").replaceChildren(...rows);
  show($("#containers-empty"), hits.length === 0);
}

function policyText(policy) {
  if (policy === null) return "none (opted out)";
  if (!policy || !Object.keys(policy).length) return "none";
  return Object.entries(policy)
    .map(([type, rule]) => {
      if (rule === null || typeof rule !== "object") return `${type}: ${rule}`;
      const parts = [];
      if (rule.retention_days != null) parts.push(`${rule.retention_days} days`);
      if (rule.max_count != null) parts.push(`at most ${rule.max_count}`);
      return `${type}: ${parts.join(", ") || "—"}`;
    })
    .join("\n");
}

async function openContainer(id) {
  showError($("#container-error"), null);
  try {
    const source = await api(`${CONTAINERS}/${encodeURIComponent(id)}`);
    agentic.container = { id, source };
  } catch (error) {
    show($("#container-detail"), true);
    showError($("#container-error"), error);
    return;
  }
  const { source } = agentic.container;
  const config = source.configuration || {};
  const shared = access(source);
  for (const row of document.querySelectorAll("#container-table tbody tr")) row.classList.toggle("selected", row.dataset.containerId === id);
  $("#container-name").textContent = source.name || "(unnamed)";
  $("#container-access").textContent = shared.text;
  $("#container-access").className = `badge ${shared.own ? "own" : "shared"}`;
  $("#container-access").title = shared.title;
  const strategies = (config.strategies || []).map(
    (s) => `${s.type}${s.enabled === false ? " (disabled)" : ""} · namespace ${(s.namespace || []).join(", ") || "—"} · ${s.id}`,
  );
  const embedding = config.embedding_model_id
    ? `${config.embedding_model_id} · ${config.embedding_model_type || "?"} · ${config.embedding_dimension ?? "?"} dimensions`
    : "none";
  metaList($("#container-meta"), [
    ["id", id],
    ["description", source.description],
    ["owner", source.owner?.name || "organisation key"],
    ["shared with roles", (source.backend_roles || []).join(", ")],
    ["strategies", strategies.join("\n") || "none"],
    ["embedding model", embedding],
    ["LLM", config.llm_id],
    ["retention policy", policyText(config.retention_policy)],
    ["history", config.disable_history ? "disabled" : undefined],
    ["created", when(source.created_time)],
  ]);
  show($("#container-detail"), true);
  show($("#fact-detail"), false);
  show($("#session-detail"), false);
  show($("#forget-report"), false);
  $("#lt-results").replaceChildren();
  $("#lt-search-meta").textContent = "";
  $("#retention-result").replaceChildren();
  showError($("#retention-error"), null);
  agentic.facts.reset();
  agentic.sessions.reset();
  selectPane(document.querySelector(".subtab[aria-pressed=true]")?.dataset.pane || "facts");
  $("#container-name").focus();
}

function selectPane(name) {
  for (const button of document.querySelectorAll(".subtab")) {
    const selected = button.dataset.pane === name;
    button.setAttribute("aria-pressed", String(selected));
    show($(`#pane-${button.dataset.pane}`), selected);
  }
  if (!agentic.container) return;
  if (name === "facts") agentic.facts.load();
  if (name === "sessions") agentic.sessions.load();
}

// facts

function renderFacts(hits) {
  const rows = hits.map((hit) => {
    const fact = hit._source;
    agentic.texts.set(hit._id, fact.memory);
    return el(
      "tr",
      { dataset: { factId: hit._id }, className: hit._id === agentic.fact ? "selected" : "" },
      el("td", {}, el("button", { type: "button", className: "link open", onclick: () => openFact(hit._id) }, fact.memory ?? "")),
      el("td", {}, fact.strategy_type || "—", el("div", { className: "muted small" }, fact.strategy_id || "")),
      el("td", {}, namespaceText(fact.namespace) || "—"),
      el("td", { className: "pinned" }, fact.pinned ? "pinned" : "—"),
      el("td", {}, when(fact.last_updated_time)),
    );
  });
  $("#fact-table tbody").replaceChildren(...rows);
  show($("#facts-empty"), hits.length === 0);
}

function historyEntry(hit) {
  const entry = hit._source;
  const parts = [];
  if (entry.before?.memory != null) parts.push(el("div", { className: "before" }, el("span", { className: "muted" }, "before "), entry.before.memory));
  if (entry.after?.memory != null) parts.push(el("div", { className: "after" }, el("span", { className: "muted" }, "after "), entry.after.memory));
  if (entry.error) parts.push(el("div", { className: "error-text" }, entry.error));
  return el(
    "li",
    { className: "entry", dataset: { historyId: hit._id, action: entry.action || "ERROR" } },
    el("div", { className: "entry-head" }, el("span", { className: `action ${(entry.action || "error").toLowerCase()}` }, entry.action || "ERROR"),
      el("span", { className: "muted small" }, when(entry.created_time))),
    ...parts,
  );
}

let factHistory = null;

async function openFact(id) {
  agentic.fact = id;
  for (const row of document.querySelectorAll("#fact-table tbody tr")) row.classList.toggle("selected", row.dataset.factId === id);
  showError($("#fact-error"), null);
  show($("#fact-detail"), true);
  $("#fact-history").replaceChildren();
  $("#fact-sources").replaceChildren();
  let fact;
  try {
    fact = await api(containerPath("memories", "long-term", id), { params: { sources: "true" } });
    if (agentic.fact !== id) return; // another fact was opened meanwhile
  } catch (error) {
    $("#fact-text").textContent = agentic.texts.get(id) || id;
    $("#fact-meta").replaceChildren();
    showError($("#fact-error"), error);
    return;
  }
  $("#fact-text").textContent = fact.memory ?? "";
  metaList($("#fact-meta"), [
    ["id", id],
    ["strategy", `${fact.strategy_type || "?"} · ${fact.strategy_id || ""}`],
    ["namespace", namespaceText(fact.namespace)],
    ["tags", fact.tags && Object.keys(fact.tags).length ? namespaceText(fact.tags) : undefined],
    ["pinned", fact.pinned ? "yes" : "no"],
    ["created", when(fact.created_time)],
    ["last change", when(fact.last_updated_time)],
  ]);
  factHistory = new ServerPages({
    path: () => containerPath("memories", "history", "_search"),
    query: () => ({ term: { memory_id: id } }),
    sort: OLDEST_FIRST,
    size: 50,
    render: (hits) => {
      if (agentic.fact !== id) return;
      $("#fact-history").append(...hits.map(historyEntry));
      if (!$("#fact-history").children.length) $("#fact-history").append(el("li", { className: "muted" }, "No history (the container may disable it)."));
      show($("#fact-history-more"), Boolean(factHistory.cursors[factHistory.page + 1]));
    },
    error: $("#fact-error"),
  });
  await Promise.all([factHistory.load(), renderSources(id, fact.memory_sources || [])]);
  $("#fact-text").focus();
}

async function renderSources(id, sources) {
  if (!sources.length) {
    $("#fact-sources").replaceChildren(el("li", { className: "muted" }, "No recorded source (written by hand, or before sources were recorded)."));
    return;
  }
  const items = await Promise.all(
    sources.map(async (source) => {
      const head = el("div", { className: "entry-head" });
      const item = el("li", { className: "entry source", dataset: { workingMemoryId: source.working_memory_id || "" } }, head);
      if (!source.working_memory_id) {
        head.append(el("span", { className: "muted" }, "unknown origin (before sources were recorded)"));
      } else {
        head.append(el("span", { className: "mono small" }, `working memory ${source.working_memory_id}`));
        if (source.session_id) head.append(el("span", { className: "muted small" }, `session ${source.session_id}`));
      }
      if (source.memory != null) item.append(el("div", { className: "after" }, el("span", { className: "muted" }, "its run wrote "), source.memory));
      if (source.working_memory_id) {
        try {
          const working = await api(containerPath("memories", "working", source.working_memory_id));
          item.append(workingBody(working));
        } catch (error) {
          item.append(el("div", { className: "muted small" }, error.status === 404 ? "this working memory no longer exists" : `${error.status ?? ""}: ${error.message}`));
        }
      }
      return item;
    }),
  );
  if (agentic.fact === id) $("#fact-sources").replaceChildren(...items);
}

function workingBody(working) {
  const body = el("div", { className: "working-body" });
  for (const message of working.messages || []) body.append(el("div", { className: "message-line" }, messageText(message)));
  if (working.structured_data) body.append(el("div", { className: "message-line mono" }, JSON.stringify(working.structured_data)));
  return body;
}

// sessions and their working memory

function renderSessions(hits) {
  const rows = hits.map((hit) => {
    const session = hit._source;
    return el(
      "tr",
      { dataset: { sessionId: hit._id }, className: hit._id === agentic.session ? "selected" : "" },
      el("td", {}, el("button", { type: "button", className: "link open", onclick: () => openSession(hit._id, session) }, session.summary || "(no summary)"),
        el("div", { className: "muted small" }, hit._id), session.pinned ? el("span", { className: "badge" }, "pinned") : null),
      el("td", {}, namespaceText(session.namespace) || "—"),
      el("td", {}, when(session.last_updated_time)),
      el("td", {}, el("button", { type: "button", className: "danger delete", onclick: () => forget("sessions", hit._id, `session ${session.summary || hit._id}`) }, "Delete")),
    );
  });
  $("#session-table tbody").replaceChildren(...rows);
  show($("#sessions-empty"), hits.length === 0);
}

let workingPages = null;

async function openSession(id, session) {
  agentic.session = id;
  for (const row of document.querySelectorAll("#session-table tbody tr")) row.classList.toggle("selected", row.dataset.sessionId === id);
  show($("#session-detail"), true);
  $("#session-title").textContent = session.summary || id;
  metaList($("#session-meta"), [
    ["session_id", id],
    ["namespace", namespaceText(session.namespace)],
    ["pinned", session.pinned ? "yes" : undefined],
    ["created", when(session.created_time)],
    ["updated", when(session.last_updated_time)],
  ]);
  $("#working").replaceChildren();
  workingPages = new ServerPages({
    path: () => containerPath("memories", "working", "_search"),
    query: () => ({ term: { "namespace.session_id": id } }),
    sort: OLDEST_FIRST,
    render: (hits) => {
      if (agentic.session !== id) return;
      $("#working").append(...hits.map(renderWorking));
      if (!$("#working").children.length) $("#working").append(el("li", { className: "muted" }, "No working memory."));
      show($("#working-more"), Boolean(workingPages.cursors[workingPages.page + 1]));
    },
    error: $("#session-error"),
  });
  await workingPages.load();
  $("#session-title").focus();
}

function renderWorking(hit) {
  const working = hit._source;
  return el(
    "li",
    { className: "entry working", dataset: { workingMemoryId: hit._id } },
    el("div", { className: "entry-head" }, el("span", { className: "mono small" }, hit._id),
      el("span", { className: "muted small" }, `${when(working.created_time)}${working.infer ? " · inferred" : ""}`),
      el("button", { type: "button", className: "danger delete", onclick: () => forget("working", hit._id, `this working memory (${hit._id})`) }, "Delete")),
    workingBody(working),
  );
}

/** Delete a working memory or a session after asking, then show what the cascade forgot (`?report=true`). */
function forget(type, id, what) {
  const dialog = $("#confirm-forget");
  $("#confirm-forget-text").textContent = `Delete ${what}?${type === "sessions" ? " Its working memory goes with it." : ""}`;
  dialog.returnValue = "";
  dialog.addEventListener(
    "close",
    async () => {
      if (dialog.returnValue !== "delete") return;
      try {
        const answer = await api(containerPath("memories", type, id), { method: "DELETE", params: { report: "true" } });
        showError($("#session-error"), null);
        renderReport(answer.forgotten || {});
        agentic.fact = null; // a fact shown may be gone or rolled back
        show($("#fact-detail"), false);
        if (type === "sessions" && agentic.session === id) {
          agentic.session = null;
          show($("#session-detail"), false);
        }
        if (type === "sessions") await agentic.sessions.load();
        else if (agentic.session) {
          $("#working").replaceChildren();
          workingPages.reset();
          await workingPages.load();
        }
      } catch (error) {
        showError($("#session-error"), error);
        show($("#session-detail"), true);
      }
    },
    { once: true },
  );
  dialog.showModal();
}

function renderReport(forgotten) {
  const groups = [
    ["deleted", "working memories", forgotten.working_memories],
    ["deleted", "sessions", forgotten.sessions],
    ["deleted", "long-term facts", forgotten.long_term_deleted],
    ["kept", "long-term facts (other sources remain)", forgotten.long_term_kept],
    ["deleted", "history entries", forgotten.history_deleted],
    ["redacted", "history entries", forgotten.history_redacted],
  ];
  const kept = new Set(forgotten.long_term_kept || []);
  const lists = groups.map(([verdict, what, ids = []]) =>
    el(
      "div",
      { className: `report-group ${verdict}${ids.length ? "" : " empty"}`, dataset: { verdict, what } },
      el("h5", {}, `${verdict}: ${ids.length} ${what}`),
      ids.length
        ? el("ul", {}, ...ids.map((id) => {
          const item = el("li", { dataset: { id } }, el("span", { className: "mono small" }, id));
          if (kept.has(id) && verdict === "kept") keptText(id, item);
          else if (agentic.texts.has(id) && what.startsWith("long-term")) item.append(` — ${agentic.texts.get(id)}`);
          return item;
        }))
        : null,
    ),
  );
  $("#forget-report").replaceChildren(
    el("div", { className: "toolbar" }, el("h4", {}, "What the delete forgot"),
      el("button", { type: "button", className: "link", onclick: () => show($("#forget-report"), false) }, "Dismiss")),
    ...lists,
    el("p", { className: "muted small" }, `queued infer runs deleted: ${forgotten.infer_jobs_deleted ?? 0}`),
  );
  show($("#forget-report"), true);
  for (const id of forgotten.long_term_deleted || []) agentic.texts.delete(id);
}

/** A kept fact's text as it is now (rolled back when the forgotten source wrote it last). */
async function keptText(id, item) {
  try {
    const fact = await api(containerPath("memories", "long-term", id));
    agentic.texts.set(id, fact.memory);
    item.append(el("span", { className: "kept-text" }, ` — now: ${fact.memory}`));
  } catch (error) {
    item.append(el("span", { className: "muted small" }, ` (${error.status ?? ""}: ${error.message})`));
  }
}

// search over long-term memory

function addNamespace(name = "", value = "") {
  const row = $("#namespace-row").content.firstElementChild.cloneNode(true);
  row.querySelector(".ns-key").value = name;
  row.querySelector(".ns-value").value = value;
  row.querySelector(".remove-namespace").addEventListener("click", () => row.remove());
  $("#lt-namespace").append(row);
  row.querySelector(".ns-key").focus();
}

async function runLongTermSearch() {
  const mode = $("#lt-mode").value;
  const body = { query: $("#lt-q").value, k: Number($("#lt-k").value || 10) };
  const namespace = {};
  for (const row of document.querySelectorAll("#lt-namespace .namespace-row")) {
    const name = row.querySelector(".ns-key").value.trim();
    if (name) namespace[name] = row.querySelector(".ns-value").value;
  }
  if (Object.keys(namespace).length) body.namespace = namespace;
  if ($("#lt-min-score").value) body.min_score = Number($("#lt-min-score").value);
  if (mode === "hybrid") {
    const bm25 = Number($("#lt-bm25").value);
    body.bm25_weight = bm25;
    body.neural_weight = Math.round((1 - bm25) * 1000) / 1000;
  }
  showError($("#lt-search-error"), null);
  $("#lt-search-meta").textContent = "Searching…";
  try {
    const answer = await api(containerPath("memories", "long-term", mode === "hybrid" ? "_hybrid_search" : "_semantic_search"), { method: "POST", body });
    const hits = answer.hits.hits;
    const weights = mode === "hybrid" ? ` · bm25 ${body.bm25_weight}, neural ${body.neural_weight}` : "";
    $("#lt-search-meta").textContent = `${hits.length} ${mode} results${weights}${answer.timed_out ? " · timed out" : ""}`;
    $("#lt-results").replaceChildren(
      ...hits.map((hit) => {
        agentic.texts.set(hit._id, hit._source.memory);
        return el(
          "li",
          { className: "result", dataset: { factId: hit._id } },
          el("div", { className: "result-head" },
            el("span", { className: "score", title: mode === "hybrid" ? "min-max normalised, weighted mean" : "(1 + cosine) / 2" }, hit._score.toFixed(4)),
            el("button", { type: "button", className: "link fact-text", onclick: () => showFact(hit._id) }, hit._source.memory ?? "")),
          el("dl", { className: "facts" },
            el("div", {}, el("dt", {}, "strategy"), el("dd", {}, hit._source.strategy_type || "—")),
            el("div", {}, el("dt", {}, "namespace"), el("dd", {}, namespaceText(hit._source.namespace) || "—")),
            el("div", {}, el("dt", {}, "changed"), el("dd", {}, when(hit._source.last_updated_time)))),
        );
      }),
    );
    if (!hits.length) $("#lt-results").append(el("li", { className: "muted" }, "No results."));
  } catch (error) {
    $("#lt-search-meta").textContent = "";
    $("#lt-results").replaceChildren();
    showError($("#lt-search-error"), error);
  }
}

function showFact(id) {
  selectPane("facts");
  openFact(id);
}

// retention

async function dryRun() {
  showError($("#retention-error"), null);
  const out = $("#retention-result");
  out.replaceChildren(el("p", { className: "muted" }, "Evaluating…"));
  try {
    const result = await api(`${containerPath("_retention", "_dry_run")}`, { method: "POST" });
    const rows = Object.entries(result.would_delete || {}).map(([type, counts]) =>
      el(
        "tr",
        { dataset: { type } },
        el("th", { scope: "row" }, type),
        el("td", { className: "count" }, String(counts.total ?? 0)),
        el("td", {}, Object.entries(counts.by_reason || {}).map(([reason, n]) => `${reason}: ${n}`).join(", ") || "not evaluated"),
      ),
    );
    out.replaceChildren(
      el("dl", { className: "meta" },
        el("dt", {}, "policy"), el("dd", {}, `${result.policy_source}${result.policy_source === "none" ? "" : `\n${policyText(result.effective_policy)}`}`),
        el("dt", {}, "evaluated"), el("dd", {}, when(result.evaluated_at)),
        el("dt", {}, "would delete"), el("dd", { id: "retention-total" }, String(result.total_would_delete ?? 0)),
        el("dt", {}, "pinned, kept"), el("dd", {}, String(result.pinned_would_skip ?? 0))),
      el("table", { id: "retention-table" },
        el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "type"), el("th", { scope: "col" }, "would delete"), el("th", { scope: "col" }, "why"))),
        el("tbody", {}, ...rows)),
      ...(result.warnings || []).map((warning) => el("p", { className: "warning", role: "status" }, warning)),
    );
  } catch (error) {
    out.replaceChildren();
    showError($("#retention-error"), error);
  }
}

function wireAgentic() {
  containerPages.prev = $("#containers-prev");
  containerPages.next = $("#containers-next");
  containerPages.label = $("#containers-label");
  containerPages.error = $("#agentic-error");
  agentic.facts = new ServerPages({
    path: () => containerPath("memories", "long-term", "_search"),
    render: renderFacts,
    prev: $("#facts-prev"),
    next: $("#facts-next"),
    label: $("#facts-label"),
    error: $("#container-error"),
  });
  agentic.sessions = new ServerPages({
    path: () => containerPath("memories", "sessions", "_search"),
    render: renderSessions,
    prev: $("#sessions-prev"),
    next: $("#sessions-next"),
    label: $("#sessions-label"),
    error: $("#container-error"),
  });
  for (const [pages, name] of [[containerPages, "containers"], [agentic.facts, "facts"], [agentic.sessions, "sessions"]]) {
    $(`#${name}-prev`).addEventListener("click", () => pages.newer());
    $(`#${name}-next`).addEventListener("click", () => pages.older());
  }
  $("#containers-refresh").addEventListener("click", () => containerPages.load());
  for (const button of document.querySelectorAll(".subtab")) button.addEventListener("click", () => selectPane(button.dataset.pane));
  $("#fact-history-more").addEventListener("click", () => factHistory && factHistory.older());
  $("#working-more").addEventListener("click", () => workingPages && workingPages.older());
  $("#lt-add-namespace").addEventListener("click", () => addNamespace());
  $("#lt-mode").addEventListener("change", () => show($("#lt-weight-label"), $("#lt-mode").value === "hybrid"));
  $("#lt-search-form").addEventListener("submit", (event) => {
    event.preventDefault();
    runLongTermSearch();
  });
  $("#dry-run").addEventListener("click", dryRun);
}

// -- wiring ---------------------------------------------------------------------------

function wire() {
  $("#key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const token = $("#key").value.trim();
    if (token) useKey(token);
  });
  $("#forget-key").addEventListener("click", () => {
    sessionStorage.removeItem(KEY_STORAGE);
    signedIn(false);
    $("#key").focus();
  });
  for (const tab of document.querySelectorAll("#tabs [role=tab]")) {
    tab.addEventListener("click", () => selectTab(tab.getAttribute("aria-controls")));
  }
  $("#tabs").addEventListener("keydown", onTabKey);
  $("#refresh").addEventListener("click", loadMemories);
  $("#page-size").addEventListener("change", () => {
    memories.tokens = [0];
    memories.page = 0;
    loadMemories();
  });
  $("#older").addEventListener("click", () => {
    memories.tokens[memories.page + 1] = memories.next;
    memories.page += 1;
    loadMemories();
  });
  $("#newer").addEventListener("click", () => {
    memories.page = Math.max(0, memories.page - 1);
    loadMemories();
  });
  $("#more-messages").addEventListener("click", loadMessages);
  $("#add-filter").addEventListener("click", () => addFilter());
  $("#mode").addEventListener("change", applyMode);
  applyMode();
  $("#search-form").addEventListener("submit", (event) => {
    event.preventDefault();
    search.page = 1;
    runSearch();
  });
  $("#prev-results").addEventListener("click", () => {
    search.page -= 1;
    runSearch();
  });
  $("#next-results").addEventListener("click", () => {
    search.page += 1;
    runSearch();
  });
  $("#detail-name").tabIndex = -1;
  wireAgentic();
  setInterval(refreshStatus, STATUS_EVERY_MS);
  if (key()) signedIn(true);
}

wire();
