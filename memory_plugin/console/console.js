// The console: plain DOM over the public HTTP API.  Every value from the server
// is set with textContent (never as markup), and the key lives only in this
// tab's sessionStorage and in the Authorization header of our own requests.

const KEY_STORAGE = "memory_plugin.key";
const BASE = location.pathname.replace(/\/_console\/?$/, "");
const MEMORY = "/_plugins/_ml/memory";
const HISTORIES = "/v2/ai/conversation_histories";
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

async function api(path, { method = "GET", params = [], token = key() } = {}) {
  const query = new URLSearchParams(params).toString();
  const response = await fetch(BASE + path + (query ? `?${query}` : ""), {
    method,
    headers: { Authorization: `Bearer ${token}`, Accept: "application/json" },
    credentials: "omit",
    cache: "no-store",
  });
  const text = await response.text();
  let body = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = text;
  }
  if (!response.ok) {
    throw new ApiError(response.status, apiMessage(body, response.statusText || "request failed"));
  }
  return body;
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
  } else {
    show($("#memories"), false);
    show($("#search"), false);
    $("#status").replaceChildren(el("span", { className: "muted" }, "Enter an API key: the page shows nothing without one."));
    $("#memory-table tbody").replaceChildren();
    $("#results").replaceChildren();
    show($("#memory-detail"), false);
  }
}

// -- tabs -----------------------------------------------------------------------------

function selectTab(name) {
  for (const tab of document.querySelectorAll("[role=tab]")) {
    const selected = tab.getAttribute("aria-controls") === name;
    tab.setAttribute("aria-selected", String(selected));
    tab.tabIndex = selected ? 0 : -1;
    show($(`#${tab.getAttribute("aria-controls")}`), selected);
  }
  sessionStorage.setItem("memory_plugin.tab", name);
}

function onTabKey(event) {
  const tabs = [...document.querySelectorAll("[role=tab]")];
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
    const body = await api(HISTORIES, { params: searchParams() });
    renderResults(body);
  } catch (error) {
    $("#search-meta").textContent = "";
    $("#results").replaceChildren();
    show($("#failed-regions"), false);
    showError($("#search-error"), error);
  }
  refreshStatus();
}

function renderResults(body) {
  const meta = body.meta || {};
  search.totalPages = meta.total_pages || 0;
  $("#search-meta").textContent =
    `${meta.total_results ?? 0} results · page ${meta.page_number ?? 1} of ${Math.max(meta.total_pages ?? 0, 1)}`;
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
        { className: "result", dataset: { recordId: hit.record_id, chunkIndex: String(hit.chunk_index) } },
        el("div", { className: "result-head" },
          el("span", { className: "score", title: "cosine similarity" }, hit.score.toFixed(4)),
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
  for (const tab of document.querySelectorAll("[role=tab]")) {
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
  setInterval(refreshStatus, STATUS_EVERY_MS);
  if (key()) signedIn(true);
}

wire();
