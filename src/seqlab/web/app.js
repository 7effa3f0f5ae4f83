// seqlab's page: send the text box to POST /api/translate, show the transcript, the outputs
// (n-best or samples, with scores) and the chosen output's attention as a heatmap (a table whose
// cells are shaded by weight). Everything comes from this app; nothing is fetched from elsewhere.
"use strict";

const $ = (id) => document.getElementById(id);
let info = null;       // GET /api/info
let outputs = [];      // the hypotheses of the last answer
let chosen = 0;        // which of them the heatmap shows

async function loadInfo() {
  info = await (await fetch("/api/info")).json();
  document.body.dataset.kind = info.kind;
  const model = info.config.model;
  const size = model.type === "transformer"
    ? `Transformer ${model.num_layers}+${model.num_layers} layers, d_model ${model.d_model}`
    : `${model.cell.toUpperCase()} ${model.hidden_size}, attention ${model.attention}`;
  $("model").textContent = `${info.run} — ${size}` + (info.kind === "chat" ? " — chatbot" : "");
  fillSelect($("layer"), info.attention.layers, info.attention.layers - 1);
  fillSelect($("head"), info.attention.heads, 0);
  $("beam").max = info.limits.max_beam;
  $("text").maxLength = info.limits.max_input_chars;
  document.body.dataset.ready = "true";
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

$("ask").addEventListener("submit", ask);
$("text").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); $("ask").requestSubmit(); }
});
$("layer").addEventListener("change", drawHeatmap);
$("head").addEventListener("change", drawHeatmap);
loadInfo().catch((error) => { $("error").textContent = `cannot reach the model: ${error}`; });
