// seqlab's page, shaped by the run's kind (GET /api/info). A translator or chatbot: send the text box
// to POST /api/translate, show the transcript, the outputs (n-best or samples, with scores) and the
// chosen output's attention as a heatmap (a table whose cells are shaded by weight). Word vectors:
// a word's nearest neighbours (POST /api/similar) and analogies (POST /api/analogy), each a table of
// words and cosines with a bar. A language model: the text box is a start, POST /api/generate continues
// it, and each continuation's tokens are shaded by their probability given everything before them
// (the number under each token, and on hover). Everything comes from this app; nothing is fetched from
// elsewhere.
"use strict";

const $ = (id) => document.getElementById(id);
let info = null;       // GET /api/info
let outputs = [];      // the hypotheses of the last answer
let chosen = 0;        // which of them the heatmap shows

async function loadInfo() {
  info = await (await fetch("/api/info")).json();
  document.body.dataset.kind = info.kind;
  if (info.kind === "vectors") showVectors(); else if (info.kind === "lm") showLM(); else showModel();
  document.body.dataset.ready = "true";
}

function showModel() {
  const model = info.config.model;
  const size = model.type === "transformer"
    ? `Transformer ${model.num_layers}+${model.num_layers} layers, d_model ${model.d_model}`
    : `${model.cell.toUpperCase()} ${model.hidden_size}, attention ${model.attention}`;
  $("model").textContent = `${info.run} — ${size}` + (info.kind === "chat" ? " — chatbot" : "");
  fillSelect($("layer"), info.attention.layers, info.attention.layers - 1);
  fillSelect($("head"), info.attention.heads, 0);
  $("beam").max = info.limits.max_beam;
  $("text").maxLength = info.limits.max_input_chars;
}

function fillSelect(select, n, selected) {
  select.replaceChildren(...Array.from({ length: n }, (_, i) => new Option(String(i), String(i), false, i === selected)));
  select.disabled = n === 0;
}

function options() {
  const mode = document.querySelector("input[name=mode]:checked").value;
  if (mode === "beam") {
    const beam = Number($("beam").value);
    return { beam, nbest: Math.min(beam, 5) };
  }
  if (mode === "sample") return { sample: true, temperature: Number($("temperature").value), num_samples: 3, seed: Date.now() % 1e9 };
  return {};
}

async function ask(event) {
  event.preventDefault();
  const text = $("text").value.trim();
  if (!text) return;
  $("error").textContent = "";
  $("send").disabled = true;
  try {
    const response = await fetch("/api/translate", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ inputs: [text], attention: info.attention.layers > 0, ...options() }),
    });
    const body = await response.json();
    if (!response.ok) throw new Error(body.error || response.statusText);
    outputs = body.outputs[0].hypotheses;
    chosen = 0;
    addTurn(text, outputs[0].text);
    showOutputs();
    $("text").value = "";
  } catch (error) {
    $("error").textContent = String(error.message || error);
  } finally {
    $("send").disabled = false;
    $("text").focus();
  }
}

function addTurn(input, output) {
  const turn = (cls, text) => Object.assign(document.createElement("li"), { className: cls, textContent: text });
  $("transcript").append(turn("input", input), turn("output", output || "…"));
  $("transcript").lastElementChild.scrollIntoView({ block: "nearest" });
}

function showOutputs() {
  $("nbest").replaceChildren(...outputs.map((h, i) => {
    const li = document.createElement("li");
    li.className = i === chosen ? "chosen" : "";
    const score = Object.assign(document.createElement("span"), { className: "score", textContent: h.score.toFixed(3) });
    li.append(score, h.text);
    li.addEventListener("click", () => { chosen = i; showOutputs(); });
    return li;
  }));
  drawHeatmap();
}

function drawHeatmap() {
  const h = outputs[chosen];
  const box = $("heatmap");
  if (!h || !h.attention) { box.replaceChildren(); return; }
  const layer = Number($("layer").value), head = Number($("head").value);
  const weights = h.attention[layer][head];  // (output tokens + <eos>, source tokens)
  const rows = [...h.tokens, "<eos>"];
  const table = document.createElement("table");
  table.dataset.layer = layer;
  table.dataset.head = head;
  table.caption = Object.assign(document.createElement("caption"), { className: "hint", textContent: `layer ${layer}, head ${head}` });
  const head_row = table.createTHead().insertRow();
  head_row.append(document.createElement("th"), ...h.source_tokens.map((t) => th(t)));
  const body = table.createTBody();
  weights.forEach((row, i) => {
    const tr = body.insertRow();
    tr.append(th(rows[i]));
    row.forEach((w, j) => {
      const td = tr.insertCell();
      const shade = Math.round(255 * (1 - w));
      td.style.background = `rgb(${shade}, ${shade}, ${shade})`;
      td.title = `${rows[i]} ← ${h.source_tokens[j]}: ${w.toFixed(3)}`;
      td.dataset.weight = w;
    });
  });
  box.replaceChildren(table);
}

function th(token) {
  // "▁" (a subword that starts a word) and a space token (char level) both show as a visible "␣"
  return Object.assign(document.createElement("th"), { textContent: token === " " ? "␣" : token.replaceAll("▁", "␣") });
}

// --- word vectors -----------------------------------------------------------------------------------

const METHODS = { skipgram: "skip-gram", cbow: "CBOW", count: "PPMI + SVD" };

function showVectors() {
  $("conversation").hidden = true;
  $("inspect").hidden = true;
  $("vectors").hidden = false;
  const method = METHODS[info.method] || info.method;
  $("model").textContent = `${info.run} — ${method} word vectors, dim ${info.dim}, ${info.vocab_size.toLocaleString("en")} words`;
  $("top").max = info.limits.max_top;
  for (const id of ["word", "a", "b", "c"]) $(id).maxLength = info.limits.max_input_chars;
  $("word").focus();
}

async function postJSON(path, request) {
  const response = await fetch(path, {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(request),
  });
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

// Send a form's request, then draw the answer into `table`; an error (e.g. a word not in the
// vocabulary) empties the table and is shown under the forms.
async function lookUp(event, path, request, table, rows, caption) {
  event.preventDefault();
  const button = event.target.querySelector("button");
  $("vectors-error").textContent = "";
  button.disabled = true;
  try {
    const body = await postJSON(path, { ...request, top: Number($("top").value) || 10 });
    drawScores(table, rows(body), caption(body));
  } catch (error) {
    drawScores(table, [], "");
    $("vectors-error").textContent = String(error.message || error);
  } finally {
    button.disabled = false;
  }
}

function similar(event) {
  const word = $("word").value.trim();
  return lookUp(event, "/api/similar", { word }, $("neighbours"), (body) => body.neighbours,
    (body) => `nearest to “${body.word}”`);
}

function analogy(event) {
  const [a, b, c] = ["a", "b", "c"].map((id) => $(id).value.trim());
  return lookUp(event, "/api/analogy", { a, b, c }, $("answers"), (body) => body.answers,
    (body) => `${body.a} : ${body.b} = ${body.c} : ?`);
}

// rows: [{word, cosine}], best first -> rank, word (click it to see its own neighbours), cosine and a bar
function drawScores(table, rows, caption) {
  table.caption.textContent = caption;
  table.tBodies[0].replaceChildren(...rows.map((row, i) => {
    const tr = document.createElement("tr");
    const rank = Object.assign(document.createElement("td"), { className: "rank", textContent: String(i + 1) });
    const word = Object.assign(document.createElement("td"), { className: "word", textContent: row.word, title: "its neighbours" });
    word.addEventListener("click", () => { $("word").value = row.word; $("similar").requestSubmit(); });
    const cosine = Object.assign(document.createElement("td"), { className: "cosine" });
    cosine.dataset.cosine = row.cosine;
    const bar = Object.assign(document.createElement("span"), { className: row.cosine < 0 ? "bar negative" : "bar" });
    bar.style.width = `${Math.min(1, Math.abs(row.cosine)) * 100}%`;
    const value = Object.assign(document.createElement("span"), { className: "value", textContent: row.cosine.toFixed(3) });
    const track = Object.assign(document.createElement("span"), { className: "track" });
    track.append(bar);
    cosine.append(value, track);
    tr.append(rank, word, cosine);
    return tr;
  }));
}

$("similar").addEventListener("submit", similar);
$("analogy").addEventListener("submit", analogy);

// --- a language model -------------------------------------------------------------------------------

function showLM() {
  const model = info.model;
  const shape = model.type === "lm"
    ? `${model.cell.toUpperCase()} language model, ${model.num_layers} × ${model.hidden_size}`
    : `causal Transformer language model, ${model.num_layers} × ${model.d_model}`;
  const valid = info.metrics && info.metrics.valid && info.metrics.valid.perplexity;
  $("model").textContent = `${info.run} — ${shape}, ${info.tokens.vocab_size.toLocaleString("en")} ${info.tokens.level} tokens`
    + (valid ? `, valid perplexity ${valid.toFixed(2)}` : "");
  $("transcript").hidden = true;
  $("inspect").hidden = true;
  $("lm").hidden = false;
  for (const element of document.querySelectorAll(".lm-only")) element.hidden = false;
  $("text").required = false;  // an empty start: a sentence from its beginning
  $("text").placeholder = "Type the start of a sentence (or nothing); Enter continues it";
  $("send").textContent = "Continue";
  $("beam").max = info.limits.max_beam;
  $("text").maxLength = info.limits.max_input_chars;
  $("length").max = info.limits.max_output_length;
  $("length").value = Math.min(30, info.max_output_length, info.limits.max_output_length);
  $("lm-legend").querySelector(".scale").replaceChildren(...[0, 0.25, 0.5, 0.75, 1].map((p) => {
    const swatch = Object.assign(document.createElement("span"), { textContent: p.toFixed(2) });
    swatch.style.background = tint(p);
    return swatch;
  }));
  $("text").focus();
}

async function generate(event) {
  event.preventDefault();
  const start = $("text").value.trim();
  $("error").textContent = "";
  $("send").disabled = true;
  try {
    const body = await postJSON("/api/generate", { start, max_length: Number($("length").value) || undefined, ...options() });
    drawContinuations(body.start, body.outputs);
  } catch (error) {
    $("continuations").replaceChildren();
    $("error").textContent = String(error.message || error);
  } finally {
    $("send").disabled = false;
    $("text").focus();
  }
}

// outputs: [{text, continuation, log_prob, tokens: [{token, probability}]}], best first
function drawContinuations(start, outputs) {
  $("continuations").replaceChildren(...outputs.map((output) => {
    const li = document.createElement("li");
    li.dataset.text = output.text;
    const score = Object.assign(document.createElement("span"), {
      className: "score", textContent: `log P ${output.log_prob.toFixed(3)}`, title: "log-probability of the continuation given the start",
    });
    const line = Object.assign(document.createElement("p"), { className: "tokens" });
    if (start) line.append(Object.assign(document.createElement("span"), { className: "start", textContent: start }));
    line.append(...output.tokens.map(tokenChip));
    li.append(score, line);
    return li;
  }));
}

// One token: its text ("▁" starts a word; a space shows as "␣"), shaded by its probability, the number under it
function tokenChip({ token, probability }) {
  const chip = Object.assign(document.createElement("span"), { className: "token" });
  let text = token;
  if (token === "<eos>") chip.classList.add("eos");
  else if (token === " " || token === "▁") text = "␣";
  else if (token.startsWith("▁")) { text = token.slice(1); chip.classList.add("word-start"); }
  chip.append(
    Object.assign(document.createElement("span"), { className: "piece", textContent: text }),
    Object.assign(document.createElement("small"), { className: "p", textContent: probability < 0.005 ? "<.01" : probability.toFixed(2) }),
  );
  chip.dataset.probability = probability;
  chip.title = `P(${text} | before) = ${probability < 0.001 ? probability.toExponential(2) : probability.toFixed(4)}`;
  chip.style.background = tint(probability);
  return chip;
}

// more probable, deeper blue (the accent colour), as the attention heatmap is darker where it attends more
function tint(probability) {
  return `rgba(47, 91, 211, ${(0.06 + 0.6 * probability).toFixed(3)})`;
}

// --- start ------------------------------------------------------------------------------------------

$("ask").addEventListener("submit", (event) => (info && info.kind === "lm" ? generate : ask)(event));
$("text").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); $("ask").requestSubmit(); }
});
$("layer").addEventListener("change", drawHeatmap);
$("head").addEventListener("change", drawHeatmap);
loadInfo().catch((error) => { $("error").textContent = `cannot reach the model: ${error}`; });
