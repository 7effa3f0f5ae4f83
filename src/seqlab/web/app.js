// seqlab's page, shaped by the run's kind (GET /api/info). A translator or chatbot: send the text box
// to POST /api/translate, show the transcript, the outputs (n-best or samples, with scores) and the
// chosen output's attention as a heatmap (a table whose cells are shaded by weight). Word vectors:
// a word's nearest neighbours (POST /api/similar) and analogies (POST /api/analogy), each a table of
// words and cosines with a bar. A language model: the text box is a start, POST /api/generate continues
// it, and each continuation's tokens are shaded by their probability given everything before them
// (the number under each token, and on hover). A classifier: what is typed is classified as it is typed
// (POST /api/classify): its label, every class's probability as a bar, and its tokens shaded by the
// attention of the pooled position (the sentence vector), for a chosen layer and head or the heads' mean.
// A span extractor: the text box is a question about the context pasted beside it (POST /api/answer): the
// answer, marked in the context, and the context's tokens shaded by the probability that the answer starts there.
// Everything comes from this app; nothing is fetched from elsewhere.
"use strict";

const $ = (id) => document.getElementById(id);
let info = null;       // GET /api/info
let outputs = [];      // the hypotheses of the last answer
let chosen = 0;        // which of them the heatmap shows

async function loadInfo() {
  info = await (await fetch("/api/info")).json();
  document.body.dataset.kind = info.kind;
  ({ vectors: showVectors, lm: showLM, classify: showClassifier, answer: showReader }[info.kind] || showModel)();
  document.body.dataset.ready = "true";
}

function showModel() {
  $("model").textContent = `${info.run} — ${info.shape}` + (info.kind === "chat" ? " — chatbot" : "");
  fillSelect($("layer"), info.attention.layers, info.attention.layers - 1);
  fillSelect($("head"), info.attention.heads, 0);
  $("beam").max = info.limits.max_beam;
  $("text").maxLength = info.limits.max_input_chars;
  openOnRunSearch();
}

// The run's own search (its config's eval.beam) selected as the page opens; greedy is asked for as beam 1, so that
// the run's beam does not fill it in (DecodeOptions.or_run_search)
function openOnRunSearch() {
  if (info.search.beam > 1) {
    $("beam").value = Math.min(info.search.beam, info.limits.max_beam);
    document.querySelector("input[name=mode][value=beam]").checked = true;
  }
}

function fillSelect(select, n, selected) {
  select.replaceChildren(...Array.from({ length: n }, (_, i) => new Option(String(i), String(i), false, i === selected)));
  select.disabled = n === 0;
}

function options() {
  const mode = document.querySelector("input[name=mode]:checked").value;
  if (mode === "beam") {
    const beam = Number($("beam").value);
    return { beam, nbest: Math.min(beam, 5), ...constraints() };
  }
  if (mode === "sample") {
    return { sample: true, temperature: Number($("temperature").value), num_samples: 3, seed: Date.now() % 1e9, ...constraints() };
  }
  return { beam: 1, ...constraints() };
}

// DecodeOptions' min_length, no_repeat_ngram_size and repetition_penalty, where they are set
function constraints() {
  const chosen = {};
  const minLength = Number($("min-length").value), ngram = Number($("ngram").value), penalty = Number($("repetition").value);
  if (minLength > 0) chosen.min_length = minLength;
  if (ngram > 0) chosen.no_repeat_ngram_size = ngram;
  if (penalty > 0 && penalty !== 1) chosen.repetition_penalty = penalty;
  return chosen;
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
    if (body.outputs[0].truncated) $("error").textContent = "the input was longer than the model reads: only its first tokens were used";
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
    const cosine = barCell("cosine", row.cosine, row.cosine.toFixed(3));
    cosine.dataset.cosine = row.cosine;
    tr.append(rank, word, cosine);
    return tr;
  }));
}

// A cell with a number and a bar as long as |value| (at most 1); a negative value's bar in another colour
function barCell(className, value, text) {
  const cell = Object.assign(document.createElement("td"), { className });
  const bar = Object.assign(document.createElement("span"), { className: value < 0 ? "bar negative" : "bar" });
  bar.style.width = `${Math.min(1, Math.abs(value)) * 100}%`;
  const track = Object.assign(document.createElement("span"), { className: "track" });
  track.append(bar);
  cell.append(Object.assign(document.createElement("span"), { className: "value", textContent: text }), track);
  return cell;
}

$("similar").addEventListener("submit", similar);
$("analogy").addEventListener("submit", analogy);

// --- a language model -------------------------------------------------------------------------------

function showLM() {
  const valid = info.metrics && info.metrics.valid && info.metrics.valid.perplexity;
  $("model").textContent = `${info.run} — ${info.shape}, ${info.tokens.vocab_size.toLocaleString("en")} ${info.tokens.level} tokens`
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
  openOnRunSearch();
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

// One token, shaded by its probability, the number under it
function tokenChip({ token, probability }) {
  const chip = chipOf(token, probability, probability);
  chip.dataset.probability = probability;
  chip.title = `P(${chip.firstChild.textContent} | before) = ${probability < 0.001 ? probability.toExponential(2) : probability.toFixed(4)}`;
  return chip;
}

// A token's chip: its text ("▁" starts a word; a space shows as "␣"; <sos> and <eos> small and grey), `value`
// under it, shaded by `shade` (0 to 1)
function chipOf(token, value, shade) {
  const chip = Object.assign(document.createElement("span"), { className: "token" });
  let text = token;
  if (token === "<eos>" || token === "<sos>") chip.classList.add("eos");
  else if (token === " " || token === "▁") text = "␣";
  else if (token.startsWith("▁")) { text = token.slice(1); chip.classList.add("word-start"); }
  chip.append(
    Object.assign(document.createElement("span"), { className: "piece", textContent: text }),
    Object.assign(document.createElement("small"), { className: "p", textContent: value < 0.005 ? "<.01" : value.toFixed(2) }),
  );
  chip.style.background = tint(shade);
  return chip;
}

// more probable, deeper blue (the accent colour), as the attention heatmap is darker where it attends more
function tint(probability) {
  return `rgba(47, 91, 211, ${(0.06 + 0.6 * probability).toFixed(3)})`;
}

// --- a classifier -----------------------------------------------------------------------------------

let classified = null;  // the last answer's output: {input, label, probabilities, tokens, attention}
let asked = 0;          // the number of the latest request: an older answer that comes late is dropped
let typing = 0;         // the timer that classifies once typing pauses

function showClassifier() {
  const model = info.model;
  const f1 = info.metrics && info.metrics.valid && info.metrics.valid.macro_f1;
  $("model").textContent = `${info.run} — ${info.shape}, `
    + `${info.labels.length} classes` + (f1 === undefined ? "" : `, valid macro-F1 ${f1.toFixed(1)}`);
  for (const id of ["transcript", "options", "inspect"]) $(id).hidden = true;
  $("classify").hidden = false;
  $("pooling").textContent = model.pooling === "cls" ? "cls: the <sos> position" : "mean: the mean over the positions";
  $("text").placeholder = "Type a sentence; it is classified as you type";
  $("text").maxLength = info.limits.max_input_chars;
  $("send").textContent = "Classify";
  fillSelect($("pool-layer"), info.attention.layers, info.attention.layers - 1);
  $("pool-head").replaceChildren(new Option("mean of the heads", "mean"),
    ...Array.from({ length: info.attention.heads }, (_, i) => new Option(String(i))));
  $("text").focus();
}

async function classify(event) {
  if (event) event.preventDefault();
  clearTimeout(typing);
  const text = $("text").value.trim();
  const mine = ++asked;
  $("error").textContent = "";
  if (!text) { drawClassification(null); return; }
  try {
    const body = await postJSON("/api/classify", { inputs: [text], attention: true });
    if (mine === asked) drawClassification(body.outputs[0]);
  } catch (error) {
    if (mine !== asked) return;
    drawClassification(null);
    $("error").textContent = String(error.message || error);
  }
}

// The label, then every class with its probability as a bar, most probable first
function drawClassification(output) {
  classified = output;
  $("label").textContent = output ? output.label : "";
  const rows = output ? Object.entries(output.probabilities).sort((a, b) => b[1] - a[1]) : [];
  $("probabilities").tBodies[0].replaceChildren(...rows.map(([label, p]) => {
    const tr = document.createElement("tr");
    const name = Object.assign(document.createElement("td"), { className: "label", textContent: label });
    const probability = barCell("probability", p, p.toFixed(3));
    probability.dataset.probability = p;
    tr.className = label === output.label ? "chosen" : "";
    tr.append(name, probability);
    return tr;
  }));
  drawPooled();
}

// The tokens, each shaded by the pooled position's attention to it (the darkest: the most attended)
function drawPooled() {
  const box = $("pooled");
  if (!classified || !classified.attention) { box.replaceChildren(); return; }
  const layer = Number($("pool-layer").value), head = $("pool-head").value;
  const heads = classified.attention[layer];  // (heads, tokens)
  const weights = head === "mean"
    ? heads[0].map((_, j) => heads.reduce((sum, row) => sum + row[j], 0) / heads.length)
    : heads[Number(head)];
  const most = Math.max(...weights);
  box.dataset.layer = layer;
  box.dataset.head = head;
  box.replaceChildren(...classified.tokens.map((token, j) => {
    const chip = chipOf(token, weights[j], weights[j] / most);
    chip.dataset.weight = weights[j];
    chip.title = `${token}: attention ${weights[j].toFixed(4)} (layer ${layer}, ${head === "mean" ? "mean of the heads" : `head ${head}`})`;
    return chip;
  }));
}

$("text").addEventListener("input", () => {
  if (info && info.kind === "classify") { clearTimeout(typing); typing = setTimeout(classify, 250); }
});
$("pool-layer").addEventListener("change", drawPooled);
$("pool-head").addEventListener("change", drawPooled);

// --- a span extractor -------------------------------------------------------------------------------

function showReader() {
  const f1 = info.metrics && info.metrics.valid && info.metrics.valid.f1;
  $("model").textContent = `${info.run} — ${info.shape}`
    + (f1 === undefined ? "" : `, valid F1 ${f1.toFixed(1)}`);
  for (const id of ["transcript", "options", "inspect"]) $(id).hidden = true;
  $("reader").hidden = false;
  $("text").placeholder = "Ask a question about the context; Enter sends";
  $("text").maxLength = info.limits.max_input_chars;
  $("context").maxLength = info.limits.max_context_chars;
  $("send").textContent = "Answer";
  $("context").focus();
}

async function answer(event) {
  event.preventDefault();
  const question = $("text").value.trim(), context = $("context").value;
  $("error").textContent = "";
  if (!question || !context.trim()) { $("error").textContent = "give a context and a question about it"; return; }
  $("send").disabled = true;
  try {
    drawAnswer((await postJSON("/api/answer", { inputs: [question], context })).outputs[0], context);
  } catch (error) {
    drawAnswer(null, context);
    $("error").textContent = String(error.message || error);
  } finally {
    $("send").disabled = false;
  }
}

// The answer, the context with the answer marked, and the context's tokens shaded by p(start)
function drawAnswer(output, context) {
  $("answer").textContent = output ? output.answer : "";
  $("answer-probability").textContent = output ? `(probability ${output.probability.toFixed(3)})` : "";
  if (!output) { $("marked").replaceChildren(); $("starts").replaceChildren(); return; }
  const mark = Object.assign(document.createElement("mark"), { textContent: context.slice(output.start, output.end) });
  $("marked").replaceChildren(context.slice(0, output.start), mark, context.slice(output.end));
  const first = output.tokens.indexOf("<eos>") + 1, last = output.tokens.length - 1;  // <sos> q <eos> context <eos>
  const starts = output.start_probabilities.slice(first, last), ends = output.end_probabilities.slice(first, last);
  const most = Math.max(...starts);
  $("starts").replaceChildren(...output.tokens.slice(first, last).map((token, j) => {
    const chip = chipOf(token, starts[j], starts[j] / most);
    Object.assign(chip.dataset, { start: starts[j], end: ends[j] });
    chip.title = `${token}: starts the answer ${starts[j].toFixed(4)}, ends it ${ends[j].toFixed(4)}`;
    return chip;
  }));
}

// --- start ------------------------------------------------------------------------------------------

$("ask").addEventListener("submit", (event) => ((info && { lm: generate, classify, answer }[info.kind]) || ask)(event));
$("text").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); $("ask").requestSubmit(); }
});
$("layer").addEventListener("change", drawHeatmap);
$("head").addEventListener("change", drawHeatmap);
loadInfo().catch((error) => { $("error").textContent = `cannot reach the model: ${error}`; });
